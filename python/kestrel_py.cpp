// Python bindings (pybind11) of kestrel: estimators (fit, draw, features, exact variance), the Monte
// Carlo simulator, data regimes, the variance study of `kestrel variance` and the paper reproductions.
// Points are columns (d x L) as in the library: NumPy arrays in Fortran order map onto arma::mat.
//
// Copies: an F-contiguous float64 input is viewed in place (arma::mat over the NumPy buffer, no copy);
// any other array-like is copied once into Fortran order. Results are moved into a heap arma::mat owned
// by a capsule that is the base of the returned array (no copy). Long computations release the GIL.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <armadillo>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/montecarlo.hpp"
#include "analysis/pairwise.hpp"
#include "analysis/variance_study.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "data/catalog.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"
#include "experiment.hpp"
#include "io/provenance.hpp"
#include "kernels/kernel.hpp"

namespace py = pybind11;
using namespace kestrel;

void bind_study(py::module_& m);  // study_py.cpp

namespace {

using FArray = py::array_t<double, py::array::f_style | py::array::forcecast>;

// A d x L matrix over a NumPy array: in place when the array is F-contiguous float64, else over a
// Fortran-order copy that this object keeps alive. Build it with the GIL held; use it without.
struct MatIn {
  py::array keep;
  std::optional<arma::mat> m;
  const arma::mat& operator*() const { return *m; }
  const arma::mat* operator->() const { return &*m; }
};

MatIn mat_in(const py::handle& obj, const char* name) {
  MatIn r;
  py::array a;
  if (py::isinstance<py::array_t<double>>(obj)) a = py::reinterpret_borrow<py::array>(obj);
  constexpr int kAligned = 0x0100;  // NPY_ARRAY_ALIGNED
  if (!a || !(a.flags() & py::array::f_style) || !(a.flags() & kAligned) || a.ndim() != 2) a = FArray::ensure(obj);
  if (!a) throw InvalidArgument(fmt::format("{} must be convertible to a float64 array", name));
  if (a.ndim() != 2)
    throw InvalidArgument(fmt::format("{} must be a 2-D array (d x L, points are columns), got {} dimensions", name,
                                      a.ndim()));
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
void check_draw(const Estimator& e, const Draw& w, const arma::mat& X, const char* name) {
  validate_points(X, name);
  require(X.n_rows == e.dim(), "{} has dimension {}, estimator '{}' was fitted for {}", name, X.n_rows, e.info().name,
          e.dim());
  require(w.omega.n_rows == e.dim() && w.count() > 0, "the draw is {} x {}, estimator '{}' needs {} x M with M > 0",
          w.omega.n_rows, w.count(), e.info().name, e.dim());
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

RegimeOptions regime_options(const std::string& data_dir, const std::string& preprocess, const std::string& spectrum,
                             arma::uword clusters, double cluster_radius, const std::string& x_file,
                             const std::string& y_file) {
  RegimeOptions o;
  o.data_dir = data_dir;
  o.preprocess = parse_preprocess(preprocess);
  o.spectrum = spectrum;
  o.clusters = clusters;
  o.cluster_radius = cluster_radius;
  o.x_file = x_file;
  o.y_file = y_file;
  return o;
}

// A zero-copy read/write view of a member matrix of a Python-owned object (the object is the base).
py::array member_view(const arma::mat& m, py::handle owner) {
  const auto r = static_cast<py::ssize_t>(m.n_rows), c = static_cast<py::ssize_t>(m.n_cols);
  return py::array_t<double>({r, c}, {py::ssize_t(sizeof(double)), py::ssize_t(sizeof(double)) * r}, m.memptr(),
                             owner);
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

const char* kRegimeDoc =
    "Draws the set pair (X, Y), d x L each, of a regime (kestrel.regimes(); README 'Data and regimes') from stream "
    "(seed, Data, pair_index), as `kestrel variance --regime` does.";

}  // namespace

PYBIND11_MODULE(kestrel, m) {
  m.doc() =
      "kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the softmax "
      "and Gaussian kernels. Points are columns: a set of L points in R^d is a d x L float64 array (Fortran order "
      "is used without copying). Logs are natural logs. See README 'Python'.";
  m.attr("__version__") = kestrel_version();
  // As the CLI: OpenBLAS single-threaded (TBB parallelises around it), so results equal the CLI's bit for bit
  // (multi-threaded OpenBLAS rounds differently with the thread count). This also applies to NumPy when it shares
  // the OpenBLAS library; OPENBLAS_NUM_THREADS set before the import keeps its value.
  kestrel::single_threaded_blas();

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const NumericalError& e) {
      PyErr_SetString(PyExc_ArithmeticError, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });

  // Hooks for the tests of the conversions and the error mapping (not part of the documented API).
  m.def(
      "_input_address",
      [](const py::object& X) -> std::uintptr_t {
        const MatIn x = mat_in(X, "X");
        return reinterpret_cast<std::uintptr_t>(x->memptr());
      },
      "Address of the buffer the library sees for X (equal to X.ctypes.data when X is used without a copy)");
  m.def(
      "_raise", [](const std::string& kind, const std::string& message) {
        if (kind == "invalid") throw InvalidArgument(message);
        if (kind == "numerical") throw NumericalError(message);
        if (kind == "io") throw IoError(message);
        throw InvalidArgument(fmt::format("unknown error kind '{}'", kind));
      });

  // ---- estimators -------------------------------------------------------------------------------
  py::class_<Draw>(m, "Draw", "M random objects omega_1..omega_M (d x M) and, for the cos form, phases (M)")
      .def(py::init([](const py::object& omega, const py::object& phase) {
             Draw w;
             w.omega = *mat_in(omega, "omega");
             validate_points(w.omega, "omega");
             if (!phase.is_none()) {
               const auto ph = py::array_t<double, py::array::forcecast>::ensure(phase);
               require(ph && ph.ndim() == 1 && ph.size() == static_cast<py::ssize_t>(w.count()),
                       "phase must be a 1-D array of {} numbers", w.count());
               w.phase = arma::rowvec(w.count());
               for (arma::uword i = 0; i < w.count(); ++i) w.phase(i) = ph.at(i);
               require(w.phase.is_finite(), "phase must be finite");
             }
             return w;
           }),
           py::arg("omega"), py::arg("phase") = py::none(), "A draw from given projections (copied)")
      .def_property_readonly("omega", [](py::object self) { return member_view(self.cast<Draw&>().omega, self); },
                             "d x M projections (a view into the draw, no copy)")
      .def_property_readonly("phase", [](py::object self) { return member_view(self.cast<Draw&>().phase, self); },
                             "M phases (TrigRF cos form), else empty (a view, no copy)")
      .def_property_readonly("count", &Draw::count)
      .def("__repr__", [](const Draw& w) { return fmt::format("<kestrel.Draw d={} M={}>", w.omega.n_rows, w.count()); });

  py::class_<Estimator>(m, "Estimator",
                        "A random-feature estimator with its parameters fitted on a pair of sets (kestrel.fit)")
      .def_property_readonly("name", [](const Estimator& e) { return e.info().name; })
      .def_property_readonly("complex", [](const Estimator& e) { return e.info().complex; },
                             "a feature is Re(f1 f2) of complex f: two real columns per omega")
      .def_property_readonly("positive", [](const Estimator& e) { return e.info().positive; })
      .def_property_readonly("dim", &Estimator::dim)
      .def("params", [](const Estimator& e) { return from_json(e.params()); }, "Fitted parameters as a dict")
      .def(
          "log_var_over_k2",
          [](const Estimator& e, const py::object& X, const py::object& Y, arma::uword features) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            require(features > 0, "number of features M must be > 0, got {}", features);
            validate_pair(*x, *y, e.dim());
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = features == 1 ? e.log_var_over_k2(*x, *y) : e.log_var_over_k2_m(*x, *y, features);
            }
            return mat_out(std::move(r));
          },
          py::arg("X"), py::arg("Y"), py::arg("features") = 1,
          "log(Var/K^2) of the M-feature estimate for all pairs: Lx x Ly (alpha-independent; -inf where exact)")
      .def(
          "log_variance",
          [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& kernel,
             arma::uword features) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            const Kernel k = kernel_of(kernel);
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = log_variance(e, k, *x, *y, features);
            }
            return mat_out(std::move(r));
          },
          py::arg("X"), py::arg("Y"), py::arg("kernel") = "softmax", py::arg("features") = 1,
          "log Var of the M-feature estimate of K^(alpha)(x_i, y_j): Lx x Ly")
      .def(
          "summarize_variance",
          [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& kernel,
             arma::uword features) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            const Kernel k = kernel_of(kernel);
            validate_pair(*x, *y, e.dim());
            require(features > 0, "number of features M must be > 0, got {}", features);
            PairwiseSummary s;
            {
              py::gil_scoped_release nogil;
              s = summarize_exact_variance(e, k, *x, *y, 256, features);
            }
            return summary_dict(s);
          },
          py::arg("X"), py::arg("Y"), py::arg("kernel") = "softmax", py::arg("features") = 1,
          "Mean and std of log Var and log(Var/K) over all pairs, streamed (exact pairs counted in n_exact and left "
          "out of the means; when every pair is exact the means are -inf)")
      .def(
          "draw",
          [](const Estimator& e, arma::uword features, std::uint64_t seed, const std::string& sampler,
             std::uint64_t index) {
            const Sampler s = parse_sampler(sampler);
            py::gil_scoped_release nogil;
            Rng rng(seed, Stream::Features, index);
            return e.draw(features, rng, s);
          },
          py::arg("features"), py::arg("seed"), py::arg("sampler") = "iid", py::arg("index") = 0,
          "Draws M random objects from stream (seed, Features, index); sampler: iid, orthogonal, structured, halton")
      .def(
          "features",
          [](const Estimator& e, const Draw& w, const py::object& X, const std::string& side) {
            const MatIn x = mat_in(X, "X");
            const Side s = side_of(side);
            check_draw(e, w, *x, "X");
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = e.features(w, *x, s);
            }
            return mat_out(std::move(r));
          },
          py::arg("draw"), py::arg("X"), py::arg("side") = "query",
          "Softmax-kernel features f(w_m, x_i)/sqrt(M): L x M, or L x 2M [Re, Im] for complex estimators")
      .def(
          "feature_map",
          [](const Estimator& e, const Draw& w, const py::object& X, const std::string& side, const py::object& kernel) {
            const MatIn x = mat_in(X, "X");
            const Side s = side_of(side);
            const Kernel k = kernel_of(kernel);
            check_draw(e, w, *x, "X");
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = feature_map(e, w, *x, s, k);
            }
            return mat_out(std::move(r));
          },
          py::arg("draw"), py::arg("X"), py::arg("side") = "query", py::arg("kernel") = "softmax",
          "Features for K^(alpha): rows of features() scaled by exp(alpha |x_i|^2)")
      .def(
          "approximate_kernel",
          [](const Estimator& e, const Draw& w, const py::object& X, const py::object& Y, const py::object& kernel) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            const Kernel k = kernel_of(kernel);
            check_draw(e, w, *x, "X"), check_draw(e, w, *y, "Y");
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = approximate_kernel(e, w, *x, *y, k);
            }
            return mat_out(std::move(r));
          },
          py::arg("draw"), py::arg("X"), py::arg("Y"), py::arg("kernel") = "softmax",
          "Unbiased estimate of K^(alpha)(X, Y) from one draw: Lx x Ly")
      .def(
          "approximate_kernel_times",
          [](const Estimator& e, const Draw& w, const py::object& X, const py::object& Y, const py::object& C,
             const py::object& kernel) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y"), c = mat_in(C, "C");
            const Kernel k = kernel_of(kernel);
            check_draw(e, w, *x, "X"), check_draw(e, w, *y, "Y");
            require(c->is_finite(), "C must be finite");
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = approximate_kernel_times(e, w, *x, *y, *c, k);
            }
            return mat_out(std::move(r));
          },
          py::arg("draw"), py::arg("X"), py::arg("Y"), py::arg("C"), py::arg("kernel") = "softmax",
          "Unbiased estimate of K^(alpha)(X, Y) C in O((Lx + Ly) M n): Lx x n")
      .def("__repr__", [](const Estimator& e) { return fmt::format("<kestrel.Estimator {} d={}>", e.info().name, e.dim()); });

  m.def(
      "estimators",
      [] {
        py::dict d;
        for (const auto& f : estimator_families()) d[py::str(f.name)] = f.description;
        return d;
      },
      "The estimator names (as `kestrel estimators`) with their descriptions");
  m.def(
      "fit",
      [](const std::string& name, const py::object& X, const py::object& Y, const py::object& layout) {
        const std::string how = layout.is_none() ? "" : layout.cast<std::string>();
        require(how.empty() || how == "columns" || how == "rows", "layout must be 'columns' or 'rows', got '{}'", how);
        MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
        find_estimator_family(name);
        if (how == "rows") x.m = arma::mat(x->t()), y.m = arma::mat(y->t());
        require(x->n_rows == y->n_rows,
                "X is {} x {} and Y is {} x {}: points are columns (d x L), so X and Y need the same number of rows d; "
                "if your points are rows (L x d), pass X.T and Y.T",
                x->n_rows, x->n_cols, y->n_rows, y->n_cols);
        // More dimensions than points is what rows-as-samples arrays look like: say which one is meant.
        require(!how.empty() || (x->n_rows <= x->n_cols && y->n_rows <= y->n_cols),
                "X is {} x {} and Y is {} x {}: more rows (d) than columns (points); if your points are rows, pass "
                "layout='rows' (or X.T, Y.T), if d > L is intended, pass layout='columns'",
                x->n_rows, x->n_cols, y->n_rows, y->n_cols);
        py::gil_scoped_release nogil;
        return make_estimator(name, *x, *y);
      },
      py::arg("name"), py::arg("X"), py::arg("Y"), py::arg("layout") = py::none(),
      "Fits the named estimator's parameters on the pair of sets X, Y (d x L each, points are columns) and returns "
      "it. layout='rows' takes L x d arrays; an array with more rows than columns needs layout= to say which it is");

  // ---- kernels ----------------------------------------------------------------------------------
  m.def(
      "log_kernel",
      [](const py::object& X, const py::object& Y, const py::object& kernel) {
        const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
        const Kernel k = kernel_of(kernel);
        validate_sets(*x, *y);
        arma::mat r;
        {
          py::gil_scoped_release nogil;
          r = log_kernel(k, *x, *y);
        }
        return mat_out(std::move(r));
      },
      py::arg("X"), py::arg("Y"), py::arg("kernel") = "softmax", "log K^(alpha)(x_i, y_j): Lx x Ly");

  // ---- Monte Carlo ------------------------------------------------------------------------------
  m.def(
      "simulate",
      [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& kernel, std::size_t reps,
         arma::uword features, std::uint64_t seed, const std::string& sampler, const py::object& C) {
        const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
        std::optional<MatIn> c;
        if (!C.is_none()) c = mat_in(C, "C");
        const Kernel k = kernel_of(kernel);
        const MonteCarloOptions opt{reps, features, seed, parse_sampler(sampler)};
        MonteCarloResult r;
        {
          py::gil_scoped_release nogil;
          r = simulate(e, k, *x, *y, opt, c ? &**c : nullptr);
        }
        py::dict d;
        d["kernel"] = moments_dict(std::move(r.kernel));
        d["kernel_times"] = r.kernel_times ? py::object(moments_dict(std::move(*r.kernel_times))) : py::none();
        d["reps"] = r.reps;
        d["features"] = r.features;
        return d;
      },
      py::arg("estimator"), py::arg("X"), py::arg("Y"), py::arg("kernel") = "softmax", py::arg("reps") = 1000,
      py::arg("features") = 1, py::arg("seed") = 0, py::arg("sampler") = "iid", py::arg("C") = py::none(),
      "Monte Carlo: R draws of M features; per entry of K_hat (and K_hat C) the exact value, empirical mean and "
      "variance and their standard errors (dict of Lx x Ly arrays). Identical for any thread count.");

  // ---- data -------------------------------------------------------------------------------------
  m.def("regimes", [] { return regime_names(); }, "The regime names");
  m.def(
      "draw_regime",
      [](const std::string& name, arma::uword d, arma::uword L, double sigma, std::uint64_t seed,
         std::uint64_t pair_index, const std::string& data_dir, const std::string& preprocess,
         const std::string& spectrum, arma::uword clusters, double cluster_radius, const std::string& x_file,
         const std::string& y_file) {
        validate_regime(name);
        require(std::isfinite(sigma) && sigma > 0, "sigma must be > 0, got {}", sigma);
        const RegimeOptions o = regime_options(data_dir, preprocess, spectrum, clusters, cluster_radius, x_file, y_file);
        SetPair sp;
        {
          py::gil_scoped_release nogil;
          sp = draw_regime(name, d, L, sigma, seed, pair_index, o);
        }
        return py::make_tuple(mat_out(std::move(sp.X)), mat_out(std::move(sp.Y)));
      },
      py::arg("name"), py::arg("d"), py::arg("L"), py::arg("sigma"), py::arg("seed") = 1, py::arg("pair_index") = 0,
      py::arg("data_dir") = "", py::arg("preprocess") = "raw", py::arg("spectrum") = "geometric:100",
      py::arg("clusters") = 2, py::arg("cluster_radius") = 1.0, py::arg("x_file") = "", py::arg("y_file") = "",
      kRegimeDoc);
  m.def(
      "load_points_file", [](const std::string& path) { return mat_out(load_points_file(path)); }, py::arg("path"),
      "Points from a numeric text file (one point per row, comma or whitespace separated): d x n");
  m.def("default_data_dir", &default_data_dir, "$KESTREL_DATA_DIR or the repository's datasets/");

  // ---- the studies of `kestrel variance` and `kestrel sweep` (study_py.cpp) -----------------------
  bind_study(m);

  // ---- reproductions ----------------------------------------------------------------------------
  m.def(
      "experiments",
      [] {
        py::dict d;
        for (const auto& e : experiments::all_experiments()) d[py::str(e.name)] = e.title;
        return d;
      },
      "The reproductions (as `kestrel reproduce`) with their titles");
  m.def(
      "reproduce",
      [](const std::string& name, const std::string& out, bool quick, std::uint64_t seed, const std::string& data_dir,
         const std::string& preprocess) {
        const auto& e = experiments::find_experiment(name);
        experiments::Options o;
        o.quick = quick, o.seed = seed;
        o.regime_options.data_dir = data_dir;
        o.regime_options.preprocess = parse_preprocess(preprocess);
        const std::string cmd = fmt::format("python: kestrel.reproduce('{}', '{}', quick={}, seed={})", name, out,
                                            quick ? "True" : "False", seed);
        nlohmann::json claims = nlohmann::json::array();
        {
          py::gil_scoped_release nogil;
          for (const auto& c : experiments::reproduce(e, o, out, cmd)) claims.push_back(experiments::to_json(c));
        }
        return from_json(claims);
      },
      py::arg("name"), py::arg("out"), py::arg("quick") = false, py::arg("seed") = 1, py::arg("data_dir") = "",
      py::arg("preprocess") = "raw",
      "Runs one reproduction into directory `out` (NAME.h5, NAME.claims.json/.md, NAME.png) and returns its claims");
}
