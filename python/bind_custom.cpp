// Estimators written in Python (kestrel.custom, python/kestrel/custom.py): PyEstimator, a kestrel::Estimator whose
// hooks call the methods of a Python object, and the run-time registration of their families (registry.hpp).
//
// Threading: the hooks are called from TBB worker threads and take the GIL, so the Python methods run one at a time.
// Every binding that reaches estimator code releases the GIL first (else a worker waiting for it would deadlock the
// caller). Values do not depend on the thread count: features are per point, and draw() gets a NumPy Generator seeded
// from kestrel's stream for that draw (two 32-bit outputs of the stream, one 64-bit seed).
#include <cmath>
#include <string>

#include <gsl/gsl_rng.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "convert.hpp"
#include "core/error.hpp"
#include "estimators/registry.hpp"

namespace kestrel::python {
namespace {

// "TypeError: message" without the traceback pybind11 appends.
std::string error_text(const py::error_already_set& e) {
  const std::string s = e.what();
  return s.substr(0, s.find("\n\nAt:"));
}

std::string shape_of(const py::handle& r) {
  if (py::hasattr(r, "shape")) return "an array of shape " + py::repr(r.attr("shape")).cast<std::string>();
  return "a " + py::str(py::type::of(r).attr("__name__")).cast<std::string>();
}

class PyEstimator final : public Estimator {
 public:
  explicit PyEstimator(py::object obj) : obj_(std::move(obj)) {  // with the GIL
    info_.name = obj_.attr("name").cast<std::string>();
    info_.positive = obj_.attr("positive").cast<bool>();
    d_ = obj_.attr("d").cast<arma::uword>();
    exact_ = !obj_.attr("log_var_over_k2").is_none();
    require(d_ > 0, "estimator '{}': d must be > 0, got 0", info_.name);
  }
  ~PyEstimator() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }

  nlohmann::json params() const override {
    py::gil_scoped_acquire gil;
    return nlohmann::json::parse(call("params", [&] { return obj_.attr("_params_json")(); }).cast<std::string>());
  }
  nlohmann::json state() const override { return {{"family", info_.name}, {"d", d_}, {"params", params()}}; }

 protected:
  Draw draw_hook(arma::uword M, Rng& rng, Sampler) const override {
    const std::uint64_t seed = (std::uint64_t(gsl_rng_get(rng.raw())) << 32) | gsl_rng_get(rng.raw());
    py::gil_scoped_acquire gil;
    const py::object gen = py::module_::import("numpy").attr("random").attr("default_rng")(seed);
    const py::object omega = call("draw", [&] { return obj_.attr("draw")(M, gen); });
    Draw w{to_mat(omega, d_, M, "draw", "omega: d x M"), {}};
    require(w.omega.is_finite(), "estimator '{}': draw() returned an infinite value", info_.name);
    return w;
  }

  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override {
    arma::mat F;
    {
      py::gil_scoped_acquire gil;
      const py::object r = call("features", [&] {
        return obj_.attr("features")(mat_out(arma::mat(w.omega)), mat_out(arma::mat(X)),
                                     side == Side::Query ? "query" : "key");
      });
      F = to_mat(r, X.n_cols, w.count(), "features", "L x M: one row per point");
    }
    if (F.has_inf())
      throw NumericalError(fmt::format("estimator '{}': features() returned an infinite value", info_.name));
    require(!info_.positive || F.min() >= 0,
            "estimator '{}': features() returned {} but the estimator says positive = True", info_.name, F.min());
    return apply_row_scale(std::move(F), log_row_scale, log);
  }

  arma::mat log_var_hook(const PairGram& g) const override {
    const arma::mat &X = g.X, &Y = g.Y;
    require(exact_,
            "estimator '{}' has no exact variance (it defines no log_var_over_k2); kestrel.variance_study estimates "
            "it by Monte Carlo",
            info_.name);
    py::gil_scoped_acquire gil;
    const py::object r = call(
        "log_var_over_k2", [&] { return obj_.attr("log_var_over_k2")(mat_out(arma::mat(X)), mat_out(arma::mat(Y))); });
    return to_mat(r, X.n_cols, Y.n_cols, "log_var_over_k2", "Lx x Ly");
  }

 private:
  // Calls a Python method; its exception becomes a ValueError naming the estimator and the method.
  template <class F>
  py::object call(const char* method, F&& f) const {
    try {
      return f();
    } catch (py::error_already_set& e) {
      throw InvalidArgument(fmt::format("estimator '{}': {}() raised {}", info_.name, method, error_text(e)));
    }
  }

  // The result of a method as a rows x cols matrix, or a ValueError saying what was expected; NaN is refused.
  arma::mat to_mat(const py::object& r, arma::uword rows, arma::uword cols, const char* method,
                   const char* expected) const {
    const FArray a = FArray::ensure(r);
    PyErr_Clear();
    require(a && a.ndim() == 2 && a.shape(0) == py::ssize_t(rows) && a.shape(1) == py::ssize_t(cols),
            "estimator '{}': {}() must return a {} x {} float array ({}), got {}", info_.name, method, rows, cols,
            expected, shape_of(r));
    arma::mat m(a.data(), rows, cols);
    for (arma::uword j = 0; j < cols; ++j)
      for (arma::uword i = 0; i < rows; ++i)
        require(!std::isnan(m(i, j)), "estimator '{}': {}() returned NaN at [{}, {}]", info_.name, method, i, j);
    return m;
  }

  py::object obj_;
  bool exact_ = false;
};

// The Python side (kestrel.custom) keeps the classes by name; the families here only hold names, so no Python
// object outlives the interpreter in a C++ static.
py::object custom_module() { return py::module_::import("kestrel.custom"); }

std::unique_ptr<Estimator> fit_custom(const std::string& name, const arma::mat& X, const arma::mat& Y) {
  py::gil_scoped_acquire gil;
  py::object obj;
  try {
    obj = custom_module().attr("_fit")(name, mat_out(arma::mat(X)), mat_out(arma::mat(Y)));
  } catch (py::error_already_set& e) {
    throw InvalidArgument(fmt::format("estimator '{}': fit() raised {}", name, error_text(e)));
  }
  return std::make_unique<PyEstimator>(std::move(obj));
}

std::unique_ptr<Estimator> restore_custom(const nlohmann::json& state) {
  const std::string name = state.at("family").get<std::string>();
  py::gil_scoped_acquire gil;
  py::object obj;
  try {
    obj = custom_module().attr("_restore")(name, state.at("d").get<arma::uword>(), state.at("params").dump());
  } catch (py::error_already_set& e) {
    throw InvalidArgument(fmt::format("estimator '{}': restoring it from its state raised {}", name, error_text(e)));
  }
  return std::make_unique<PyEstimator>(std::move(obj));
}

}  // namespace

void bind_custom(py::module_& m) {
  m.def(
      "_custom_estimator",
      [](py::object obj) -> std::unique_ptr<Estimator> { return std::make_unique<PyEstimator>(obj); }, py::arg("obj"),
      "The kestrel.Estimator over a kestrel.custom.Estimator instance (use kestrel.custom.wrap)");
  m.def(
      "_register_custom",
      [](const std::string& name, const std::string& description, bool exact_variance, const std::string& label,
         const std::string& color, const std::string& marker, const std::string& line, bool replace) {
        Family f;
        f.name = name;
        f.description = description;
        f.make = [name](const arma::mat& X, const arma::mat& Y) { return fit_custom(name, X, Y); };
        f.restore = restore_custom;
        f.style = {label, color, marker, line};
        f.exact_variance = exact_variance;
        register_family(std::move(f), replace);
      },
      py::arg("name"), py::arg("description"), py::arg("exact_variance"), py::arg("label"), py::arg("color"),
      py::arg("marker"), py::arg("line"), py::arg("replace"),
      "Registers the family of a kestrel.custom.Estimator class (use kestrel.custom.register)");
}

}  // namespace kestrel::python
