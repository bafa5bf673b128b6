// Python bindings of the kernels (kestrel.log_kernel), the Monte Carlo simulator (kestrel.simulate) and the number
// formats of running sums (kestrel.round_to, kestrel.rounded_sums).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/montecarlo.hpp"
#include "analysis/rounded_sums.hpp"
#include "bind_options.hpp"
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
      py::arg("X"), py::arg("Y"), py::arg("kernel") = study_default("kernel"), "log K^(alpha)(x_i, y_j): Lx x Ly");

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
      py::arg("estimator"), py::arg("X"), py::arg("Y"), py::arg("kernel") = study_default("kernel"),
      py::arg("reps") = 1000, py::arg("features") = study_default("features"), py::arg("seed") = study_default("seed"),
      py::arg("sampler") = study_default("sampler"), py::arg("C") = py::none(),
      "Monte Carlo: R draws of M features; per entry of K_hat (and K_hat C) the exact value, empirical mean and "
      "variance and their standard errors (dict of Lx x Ly arrays). Identical for any thread count.");

  // ---- number formats -----------------------------------------------------------------------------
  m.def(
      "round_to",
      [](const py::object& x, const std::string& format) {
        const FloatFormat& f = find_float_format(format);
        FArray a = FArray::ensure(x);
        if (!a) {
          PyErr_Clear();
          throw InvalidArgument("round_to: x must be numbers (an array of floats)");
        }
        FArray out(a.request().shape);
        const double* in = a.data();
        double* o = out.mutable_data();
        for (py::ssize_t k = 0; k < a.size(); ++k) o[k] = round_to(in[k], f);
        return out;
      },
      py::arg("x"), py::arg("format"),
      "x rounded to the nearest value of fp32, bf16 or fp16, ties to even (+-inf above the largest finite value).");
  m.def(
      "rounded_sums",
      [](const py::object& phi, const py::object& V, const std::string& format, arma::uword chunk) {
        const FloatFormat& f = find_float_format(format);
        const MatIn p = mat_in(phi, "phi", "L x M, one token per row"), v = mat_in(V, "V", "L x dv, one token per row");
        RoundedSums s(f, p->n_cols, v->n_cols, chunk);
        {
          py::gil_scoped_release nogil;
          s.add(*p, *v);
        }
        py::dict d;
        d["state"] = mat_out(s.state());
        d["overflow"] = s.overflow();
        d["flushed"] = s.flushed();
        return d;
      },
      py::arg("phi"), py::arg("V"), py::arg("format"), py::arg("chunk") = advise_default("chunk"),
      "The key sums S = sum_j phi_j [v_j, 1]^T held in fp32, bf16 or fp16 (phi: L x M features >= 0, V: L x dv): "
      "state (M x (dv + 1), the normaliser column last), overflow (0, or the tokens after which a sum overflowed) and "
      "flushed (features > 0 stored as 0). chunk = 1: token by token; chunk = C: C tokens summed in fp32, each "
      "chunk's total added in the format.");
}

}  // namespace kestrel::python
