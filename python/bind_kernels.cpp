// Python bindings of the kernels (kestrel.log_kernel) and the Monte Carlo simulator (kestrel.simulate).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/montecarlo.hpp"
#include "convert.hpp"
#include "core/error.hpp"

namespace kestrel::python {

void bind_kernels(py::module_& m) {
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
      [](const py::object& estimator, const py::object& X, const py::object& Y, const py::object& kernel,
         Int<"reps"> reps, Int<"features", 1> features, Int<"seed"> seed, const Str<"sampler">& sampler,
         const py::object& C) {
        const Estimator& e = object_arg<Estimator>(estimator, "estimator", "a kestrel.Estimator (kestrel.fit)");
        const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
        check_points(e, *x, "X"), check_points(e, *y, "Y");
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
}

}  // namespace kestrel::python
