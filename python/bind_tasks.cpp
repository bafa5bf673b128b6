// Python bindings of the tasks, for any registered estimator (built-in or written in Python, kestrel.custom):
// kestrel.classify, the Nadaraya-Watson classification protocol of CRT 9.10.2 / DERF B.3 on a staged UCI set
// (lib/tasks/classification.hpp), and kestrel.attention_error, the error of random-feature softmax attention against
// exact attention over independent draws (lib/tasks/attention.hpp).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_options.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/uci.hpp"
#include "estimators/registry.hpp"
#include "frontend/task_options.hpp"
#include "tasks/attention.hpp"
#include "tasks/classification.hpp"

namespace kestrel::python {

namespace {

py::array vec_out(const arma::vec& v) { return mat_out(arma::mat(v)).attr("ravel")(); }

py::dict classify_dict(const NwResult& r) {
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
}

struct AttentionErrors {
  arma::vec rel, rel_norm;
  std::size_t failed = 0;
  std::string why;
};

// The relative errors of `reps` independent draws; a draw whose normaliser vanishes or overflows is counted.
AttentionErrors attention_errors(const arma::mat& q, const arma::mat& k, const arma::mat& v,
                                 const std::string& estimator, const AttentionErrorOptions& o) {
  AttentionErrors out;
  out.rel.set_size(o.reps), out.rel_norm.set_size(o.reps);
  const arma::mat Qs = attention_scaled(q), Ks = attention_scaled(k);
  const ExactAttention exact = exact_attention(Qs, Ks, v);
  const auto e = fit_attention_estimator(estimator, Qs, Ks);
  const arma::uword draws = draws_for_budget(estimator, o.features);
  arma::uword ok = 0;
  for (std::size_t r = 0; r < o.reps; ++r) {
    Rng rng(o.seed, Stream::Features, r);
    try {
      const ApproxAttention a = approximate_attention(*e, e->draw(draws, rng, o.sampler), Qs, Ks, v, {o.stabilise});
      out.rel(ok) = relative_error(a.Y, exact.Y), out.rel_norm(ok) = normaliser_relative_error(a, exact), ++ok;
    } catch (const NumericalError& err) {
      if (out.failed++ == 0) out.why = err.what();
    }
  }
  out.rel.resize(ok), out.rel_norm.resize(ok);
  return out;
}

}  // namespace

void bind_tasks(py::module_& m) {
  m.def(
      "_task_options",
      [] {
        py::dict d;
        d["classify"] = options_list(describe(classify_option_table(), {}));
        d["attention_error"] = options_list(describe(attention_error_option_table(), {}));
        return d;
      },
      "The option tables of classify and attention_error (name, kind, list, default, help), for the signatures");
  m.def(
      "classify",
      [](const Str<"set">& set, const py::object& estimator, const py::kwargs& kw) {
        ClassifyOptions c;
        apply_given(classify_option_table(), values_from_kwargs(kw, classify_option_table(), "classify"), c);
        const NwOptions& o = c.nw;
        const std::string& data_dir = c.data_dir;
        const std::string name = estimator.is_none() ? "" : str_arg(estimator, "estimator");
        if (!name.empty()) find_estimator_family(name);
        const UciData d = load_uci(data_dir.empty() ? default_data_dir() : data_dir, set);
        require(!d.classes.empty(), "'{}' is a regression set; classify needs a classification set", set.value);
        NwResult r;
        {
          py::gil_scoped_release nogil;
          const LabeledSplit s = split_standardized(d, o.seed);
          r = name.empty() ? nw_protocol_exact(s, o) : nw_protocol_rf(name, s, o);
        }
        return classify_dict(r);
      },
      py::arg("set"), py::arg("estimator") = py::none(),
      ("Nadaraya-Watson classification of a staged UCI set (kestrel.uci_sets()) with the Gaussian kernel, as CRT "
       "9.10.2 / DERF B.3: a fixed 90/5/5 split (seed), sigma tuned on the validation part over `seeds` draws, test "
       "accuracy at the best sigma per draw. estimator: any registered name (also one written in Python), or None for "
       "the exact kernel. Returns a dict of arrays (sigmas, validation_accuracy seeds x sigmas, test_accuracy, ...). "
       "Options:" +
       options_doc(describe(classify_option_table(), {})))
          .c_str());
  m.def(
      "attention_error",
      [](const py::object& Q, const py::object& K, const py::object& V, const Str<"estimator">& estimator,
         const py::kwargs& kw) {
        const MatIn q = mat_in(Q, "Q"), k = mat_in(K, "K"), v = mat_in(V, "V");
        validate_attention(*q, *k, *v);
        AttentionErrorOptions ao;
        apply_given(attention_error_option_table(),
                    values_from_kwargs(kw, attention_error_option_table(), "attention_error"), ao);
        find_estimator_family(estimator);
        AttentionErrors r;
        {
          py::gil_scoped_release nogil;
          r = attention_errors(*q, *k, *v, estimator, ao);
        }
        py::dict out;
        out["relative_error"] = vec_out(r.rel);
        out["normaliser_relative_error"] = vec_out(r.rel_norm);
        out["failed"] = r.failed;
        out["failure"] = r.why;
        return out;
      },
      py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("estimator"),
      ("Softmax attention softmax(Q^T K / sqrt(d)) V (Q: d x Lq, K: d x Lk columns, V: Lk x dv rows) approximated with "
       "`features` real feature columns of any registered estimator (also one written in Python), fitted on the "
       "scaled queries and keys: ||Y_hat - Y||_F / ||Y||_F and the row normalisers' relative error for each of `reps` "
       "draws (stream (seed, Features, r)). A draw whose normaliser vanishes or overflows is counted in `failed`, with "
       "the first reason in `failure`, and left out of the arrays. Options:" +
       options_doc(describe(attention_error_option_table(), {})))
          .c_str());
}

}  // namespace kestrel::python
