// Python bindings of the tasks, for any registered estimator (built-in or written in Python, kestrel.custom):
// kestrel.classify, the Nadaraya-Watson classification protocol of CRT 9.10.2 / DERF B.3 on a staged UCI set
// (lib/tasks/classification.hpp), and kestrel.attention_error, the error of random-feature softmax attention against
// exact attention over independent draws (lib/tasks/attention.hpp).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "convert.hpp"
#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/uci.hpp"
#include "estimators/registry.hpp"
#include "tasks/attention.hpp"
#include "tasks/classification.hpp"

namespace kestrel::python {

namespace {

py::array vec_out(const arma::vec& v) { return mat_out(arma::mat(v)).attr("ravel")(); }

}  // namespace

void bind_tasks(py::module_& m) {
  m.def(
      "classify",
      [](const Str<"set">& set, const py::object& estimator, const py::object& sigmas, Int<"seeds", 1> seeds,
         Int<"features", 1> features, const Str<"sampler">& sampler, Int<"seed"> seed,
         const Str<"data_dir">& data_dir) {
        NwOptions o;
        if (!sigmas.is_none()) {
          o.sigmas.clear();
          const bool sequence = py::isinstance<py::list>(sigmas) || py::isinstance<py::tuple>(sigmas) ||
                                (py::isinstance<py::array>(sigmas) && sigmas.attr("ndim").cast<int>() == 1);
          require(sequence, "sigmas must be a list of numbers > 0, got {}", py::repr(sigmas).cast<std::string>());
          for (const auto& s : sigmas) o.sigmas.push_back(real_arg(s, "sigmas"));
        }
        for (double s : o.sigmas) require(std::isfinite(s) && s > 0, "sigma must be > 0, got {}", s);
        require(!o.sigmas.empty(), "sigmas must not be empty");
        o.seeds = seeds, o.M = features, o.sampler = parse_sampler(sampler), o.seed = seed;
        const std::string name = estimator.is_none() ? "" : str_arg(estimator, "estimator");
        if (!name.empty()) find_estimator_family(name);
        const UciData d = load_uci(data_dir.value.empty() ? default_data_dir() : data_dir.value, set);
        require(!d.classes.empty(), "'{}' is a regression set; classify needs a classification set", set.value);
        NwResult r;
        {
          py::gil_scoped_release nogil;
          const LabeledSplit s = split_standardized(d, seed);
          r = name.empty() ? nw_protocol_exact(s, o) : nw_protocol_rf(name, s, o);
        }
        py::dict out;
        out["method"] = r.method;
        out["features"] = r.M;
        out["omegas"] = r.omegas;
        out["sigmas"] = vec_out(r.sigmas);
        out["validation_accuracy"] = mat_out(arma::mat(r.validation_accuracy));
        out["best_sigma"] = r.sigmas(r.best);
        out["test_accuracy"] = vec_out(r.test_accuracy);
        out["test_mean"] = r.test_mean();
        out["test_std"] = r.test_std();
        out["no_signal"] = vec_out(r.no_signal);
        out["overflow"] = vec_out(r.overflow);
        return out;
      },
      py::arg("set"), py::arg("estimator") = py::none(), py::arg("sigmas") = py::none(), py::arg("seeds") = 10,
      py::arg("features") = 128, py::arg("sampler") = "orthogonal", py::arg("seed") = 1, py::arg("data_dir") = "",
      "Nadaraya-Watson classification of a staged UCI set (kestrel.uci_sets()) with the Gaussian kernel, as CRT "
      "9.10.2 / DERF B.3: a fixed 90/5/5 split (seed), sigma tuned on the validation part over `seeds` draws, test "
      "accuracy at the best sigma per draw. estimator: any registered name (also one written in Python), or None for "
      "the exact kernel. Returns a dict of arrays (sigmas, validation_accuracy seeds x sigmas, test_accuracy, ...).");
  m.def(
      "attention_error",
      [](const py::object& Q, const py::object& K, const py::object& V, const Str<"estimator">& estimator,
         Int<"features", 1> features, Int<"reps", 1> reps, Int<"seed"> seed, const Str<"sampler">& sampler,
         Bool<"stabilise"> stabilise) {
        const MatIn q = mat_in(Q, "Q"), k = mat_in(K, "K"), v = mat_in(V, "V");
        validate_attention(*q, *k, *v);
        const Sampler s = parse_sampler(sampler);
        find_estimator_family(estimator);
        arma::vec rel(reps), rel_norm(reps);
        std::size_t failed = 0;
        std::string why;
        {
          py::gil_scoped_release nogil;
          const arma::mat Qs = attention_scaled(*q), Ks = attention_scaled(*k);
          const ExactAttention exact = exact_attention(Qs, Ks, *v);
          const auto e = fit_attention_estimator(estimator, Qs, Ks);
          const arma::uword draws = draws_for_budget(estimator, features);
          arma::uword ok = 0;
          for (std::size_t r = 0; r < reps; ++r) {
            Rng rng(seed, Stream::Features, r);
            try {
              const ApproxAttention a =
                  approximate_attention(*e, e->draw(draws, rng, s), Qs, Ks, *v, {stabilise.value});
              rel(ok) = relative_error(a.Y, exact.Y), rel_norm(ok) = normaliser_relative_error(a, exact), ++ok;
            } catch (const NumericalError& err) {
              if (failed++ == 0) why = err.what();
            }
          }
          rel.resize(ok), rel_norm.resize(ok);
        }
        py::dict out;
        out["relative_error"] = vec_out(rel);
        out["normaliser_relative_error"] = vec_out(rel_norm);
        out["failed"] = failed;
        out["failure"] = why;
        return out;
      },
      py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("estimator"), py::arg("features") = 64, py::arg("reps") = 10,
      py::arg("seed") = 1, py::arg("sampler") = "iid", py::arg("stabilise") = true,
      "Softmax attention softmax(Q^T K / sqrt(d)) V (Q: d x Lq, K: d x Lk columns, V: Lk x dv rows) approximated with "
      "`features` real feature columns of any registered estimator (also one written in Python), fitted on the "
      "scaled queries and keys: ||Y_hat - Y||_F / ||Y||_F and the row normalisers' relative error for each of `reps` "
      "draws (stream (seed, Features, r)). A draw whose normaliser vanishes or overflows is counted in `failed`, with "
      "the first reason in `failure`, and left out of the arrays.");
}

}  // namespace kestrel::python
