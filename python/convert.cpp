// Python <-> library conversions; see convert.hpp.
#include "convert.hpp"

#include <cmath>

#include "analysis/row_sample.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"

namespace kestrel::python {

MatIn mat_in(const py::handle& obj, const char* name, const char* layout) {
  MatIn r;
  py::array a;
  if (py::isinstance<py::array_t<double>>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    // Complex values are refused as the command line refuses a complex .npy (casting would drop the imaginary part
    // with only a NumPy warning); so are strings and objects, which would not convert.
    const py::array probe =
        py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj) : py::array::ensure(obj);
    if (probe) {
      const char kind = probe.dtype().kind();
      require(kind != 'c',
              "{} holds complex numbers (dtype {}): kestrel takes real points; pass {}.real, or the "
              "real and imaginary parts as separate coordinates",
              name, py::str(probe.dtype()).cast<std::string>(), name);
      require(kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b' || kind == 'O',
              "{} must be an array of numbers, got dtype {}", name, py::str(probe.dtype()).cast<std::string>());
    }
  }
  constexpr int kAligned = 0x0100;  // NPY_ARRAY_ALIGNED
  if (!a || !(a.flags() & py::array::f_style) || !(a.flags() & kAligned) || a.ndim() != 2) a = FArray::ensure(obj);
  if (!a) throw InvalidArgument(fmt::format("{} must be convertible to a float64 array", name));
  if (a.ndim() != 2)
    throw InvalidArgument(fmt::format("{} must be a 2-D array ({}), got {} dimensions", name, layout, a.ndim()));
  r.keep = a;
  // copy_aux_mem = false, strict = true: Armadillo uses the NumPy buffer and never reallocates it. The
  // library takes it as const, so a read-only array is fine.
  r.m.emplace(const_cast<double*>(static_cast<const double*>(a.data())), a.shape(0), a.shape(1), false, true);
  return r;
}

// Moves m to the heap; the returned array views its memory and owns it through a capsule.
py::array mat_out(arma::mat&& m) {
  auto* p = new arma::mat(std::move(m));
  py::capsule owner(p, [](void* q) { delete static_cast<arma::mat*>(q); });
  const auto r = static_cast<py::ssize_t>(p->n_rows), c = static_cast<py::ssize_t>(p->n_cols);
  return py::array_t<double>({r, c}, {py::ssize_t(sizeof(double)), py::ssize_t(sizeof(double)) * r}, p->memptr(),
                             owner);
}

arma::uvec rows_in(const py::object& rows, std::uint64_t seed, arma::uword L) {
  if (rows.is_none()) return {};
  const std::string shown = py::repr(rows).cast<std::string>();
  if (py::isinstance<py::str>(rows)) {
    require(rows.cast<std::string>() == "all", "rows must be 'all', an integer or an array of row indices, got {}",
            shown);
    return {};
  }
  // Python and NumPy integers (not bool, not float: 2.0 is refused rather than rounded).
  if (!py::isinstance<py::bool_>(rows) && !py::isinstance<py::array>(rows) && PyIndex_Check(rows.ptr())) {
    const long long n = py::reinterpret_steal<py::int_>(PyNumber_Index(rows.ptr())).cast<long long>();
    require(n > 0, "rows must be > 0 (or 'all'), got {}", n);
    return sample_rows(L, static_cast<arma::uword>(n), seed);
  }
  require(py::isinstance<py::array>(rows) || py::isinstance<py::list>(rows) || py::isinstance<py::tuple>(rows),
          "rows must be 'all', an integer or an array of row indices, got {}", shown);
  const py::array a = py::array::ensure(rows);
  require(a && a.ndim() == 1, "rows must be a 1-D array of row indices, got {}", shown);
  const char kind = a.dtype().kind();
  require(kind == 'i' || kind == 'u' || a.size() == 0, "row indices must be integers, got {} (dtype {})", shown,
          py::str(a.dtype()).cast<std::string>());
  const auto idx = py::array_t<long long, py::array::forcecast>::ensure(a);
  arma::uvec out(static_cast<arma::uword>(idx.size()));
  for (py::ssize_t i = 0; i < idx.size(); ++i) {
    require(idx.at(i) >= 0, "row index {} is negative: indices are 0..L-1 with L = {}", idx.at(i), L);
    out[static_cast<arma::uword>(i)] = static_cast<arma::uword>(idx.at(i));
  }
  check_rows(out, L);
  return out;
}

py::array rows_out(const arma::uvec& rows, arma::uword L) {
  const arma::uvec r = rows.is_empty() ? arma::regspace<arma::uvec>(0, L - 1) : rows;
  py::array_t<std::int64_t> out(static_cast<py::ssize_t>(r.n_elem));
  for (arma::uword i = 0; i < r.n_elem; ++i)
    out.mutable_at(static_cast<py::ssize_t>(i)) = static_cast<std::int64_t>(r[i]);
  return out;
}

// "softmax", "gaussian", "scaled:<alpha>", or a number alpha.
Kernel kernel_of(const py::object& k) {
  if (py::isinstance<py::str>(k)) return Kernel::parse(k.cast<std::string>());
  if (py::isinstance<py::float_>(k) || py::isinstance<py::int_>(k)) {
    const double alpha = k.cast<double>();
    require(std::isfinite(alpha), "kernel alpha must be finite, got {}", alpha);
    return Kernel{alpha};
  }
  throw InvalidArgument("kernel must be 'softmax', 'gaussian', 'scaled:<alpha>' or a number alpha");
}

Side side_of(const std::string& s) {
  if (s == "query") return Side::Query;
  if (s == "key") return Side::Key;
  throw InvalidArgument(fmt::format("side must be 'query' or 'key', got '{}'", s));
}

// The binding is a public boundary: the library's feature maps check only the dimension of X.
void check_points(const FeatureMap& e, const arma::mat& X, const char* name) {
  require_points(X, name);
  validate_points(X, name);
  // A fitted estimator knows d: an L x d array (points as rows) is recognised and named as such.
  require(X.n_rows == e.dim() || X.n_cols != e.dim(),
          "{} is {} x {}: estimator '{}' was fitted for d = {} and points are columns (d x L); your points look like "
          "rows, pass {}.T",
          name, X.n_rows, X.n_cols, e.info().name, e.dim(), name);
  require(X.n_rows == e.dim(), "{} is {} x {}: estimator '{}' was fitted for d = {} (points are columns, d x L)", name,
          X.n_rows, X.n_cols, e.info().name, e.dim());
}

std::function<void(const std::string&)> stderr_progress(bool show) {
  if (!show) return nullptr;
  return [](const std::string& line) {
    py::gil_scoped_acquire gil;
    py::module_::import("sys").attr("stderr").attr("write")(line + "\n");
  };
}

bool pop_progress(py::kwargs& kw) { return pop_flag(kw, "progress"); }

bool pop_flag(py::kwargs& kw, const char* name) {
  if (!kw.contains(name)) return false;
  const bool value = bool_arg(kw[name], name);
  PyDict_DelItemString(kw.ptr(), name);
  return value;
}

void require_points(const arma::mat& X, const char* name) {
  require(X.n_cols > 0 && X.n_rows > 0, "{} is {} x {}: {} (points are columns, d x L)", name, X.n_rows, X.n_cols,
          X.n_cols == 0 ? "no points" : "points of dimension 0");
}

void check_draw(const FeatureMap& e, const Draw& w, const arma::mat& X, const char* name) {
  check_points(e, X, name);
  require(w.dim() == e.dim() && w.count() > 0, "the draw is {} x {}, estimator '{}' needs {} x M with M > 0", w.dim(),
          w.count(), e.info().name, e.dim());
  Rng probe(0);
  const bool phased = e.draw(1, probe, Sampler::Iid).phase.n_elem > 0;
  require(w.phase.n_elem == (phased ? w.count() : 0), "estimator '{}' needs {} phases in its draw, got {}",
          e.info().name, phased ? w.count() : 0, w.phase.n_elem);
}

py::object from_json(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

py::dict moments_dict(EntryMoments&& m) {
  py::dict d;
  d["exact"] = mat_out(std::move(m.exact));
  d["mean"] = mat_out(std::move(m.mean));
  d["variance"] = mat_out(std::move(m.variance));
  d["se_mean"] = mat_out(std::move(m.se_mean));
  d["se_variance"] = mat_out(std::move(m.se_variance));
  return d;
}

// A zero-copy read/write view of a member matrix of a Python-owned object (the object is the base).
py::array member_view(const arma::mat& m, py::handle owner) {
  const auto r = static_cast<py::ssize_t>(m.n_rows), c = static_cast<py::ssize_t>(m.n_cols);
  return py::array_t<double>({r, c}, {py::ssize_t(sizeof(double)), py::ssize_t(sizeof(double)) * r}, m.memptr(), owner);
}

py::array member_view(const arma::rowvec& v, py::handle owner) {
  return py::array_t<double>({static_cast<py::ssize_t>(v.n_elem)}, {py::ssize_t(sizeof(double))}, v.memptr(), owner);
}

// log Var of pairs where the estimator is exact is -inf: a summary over pairs that are all exact has mean -inf
// (and n_exact = n_pairs), never the 0.0 of an empty mean.
py::dict summary_dict(const PairwiseSummary& s) {
  const bool all_exact = s.log_var.n == 0 && s.n_exact > 0;
  py::dict d;
  d["mean_log_var"] = all_exact ? -kInf : s.log_var.mean;
  d["std_log_var"] = s.log_var.stddev();
  d["mean_log_rel_var"] = all_exact ? -kInf : s.log_rel_var.mean;
  d["std_log_rel_var"] = s.log_rel_var.stddev();
  d["mean_log_kernel"] = s.log_kernel.mean;
  d["n_pairs"] = s.log_kernel.n;
  d["n_exact"] = s.n_exact;
  return d;
}

}  // namespace kestrel::python

namespace kestrel::python {

namespace {

std::string shown(py::handle v) {
  std::string r = py::repr(v).cast<std::string>();
  return r.size() > 60 ? r.substr(0, 57) + "..." : r;
}

// The dtype kind of a NumPy scalar or 0-d array ('i', 'u', 'f', 'b', 'c', ...), or 0 for anything else.
char numpy_kind(py::handle v) {
  if (!py::hasattr(v, "dtype") || !py::hasattr(v, "ndim")) return 0;
  try {
    if (v.attr("ndim").cast<int>() != 0) return 0;
    return v.attr("dtype").attr("kind").cast<std::string>().at(0);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::uint64_t int_arg(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi) {
  const auto fail = [&] {
    return InvalidArgument(hi == UINT64_MAX
                               ? fmt::format("{} must be an integer >= {}, got {}", name, lo, shown(v))
                               : fmt::format("{} must be an integer in [{}, {}], got {}", name, lo, hi, shown(v)));
  };
  const char kind = numpy_kind(v);
  if (PyBool_Check(v.ptr()) || !(PyLong_Check(v.ptr()) || kind == 'i' || kind == 'u')) throw fail();
  const auto i = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!i) {
    PyErr_Clear();
    throw fail();
  }
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && s < 0)) throw fail();
  std::uint64_t u = static_cast<std::uint64_t>(s);
  if (overflow > 0) {
    u = PyLong_AsUnsignedLongLong(i.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw fail();
    }
  }
  if (u < lo || u > hi) throw fail();
  return u;
}

double real_arg(py::handle v, const char* name) {
  const char kind = numpy_kind(v);
  const bool number = !PyBool_Check(v.ptr()) &&
                      (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()) || kind == 'f' || kind == 'i' || kind == 'u');
  if (number) {
    const double d = PyFloat_AsDouble(v.ptr());
    if (!PyErr_Occurred()) return d;
    PyErr_Clear();
  }
  throw InvalidArgument(fmt::format("{} must be a number, got {}", name, shown(v)));
}

std::string str_arg(py::handle v, const char* name) {
  if (!PyUnicode_Check(v.ptr())) throw InvalidArgument(fmt::format("{} must be a string, got {}", name, shown(v)));
  return v.cast<std::string>();
}

bool bool_arg(py::handle v, const char* name) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (numpy_kind(v) == 'b') return v.attr("item")().ptr() == Py_True;
  throw InvalidArgument(fmt::format("{} must be True or False, got {}", name, shown(v)));
}

}  // namespace kestrel::python
