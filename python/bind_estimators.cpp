// Python bindings of the estimators: kestrel.fit, kestrel.estimators and the Estimator/Draw classes (fit, draw,
// features, exact variance of pairs and of K-hat C, predicted attention error).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/attention_variance.hpp"
#include "analysis/coupled_variance.hpp"
#include "analysis/operator_variance.hpp"
#include "analysis/pairwise.hpp"
#include "bind_options.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "estimators/registry.hpp"

namespace kestrel::python {

namespace {

// The checked inputs of the exact K-hat C moments: points X, Y against the estimator, the matrix C (or V), M > 0,
// and the estimator's three-point form (a ValueError saying that its family has none).
struct OperatorInputs {
  MatIn x, y, c;
  Kernel k;
  ThreePointForm form;
};
OperatorInputs operator_inputs(const Estimator& e, const py::object& X, const py::object& Y, const py::object& C,
                               const char* c_name, const py::object& kernel, arma::uword features) {
  OperatorInputs in{mat_in(X, "X"), mat_in(Y, "Y"), mat_in(C, c_name), kernel_of(kernel), {}};
  check_points(e, *in.x, "X"), check_points(e, *in.y, "Y");
  require(features > 0, "number of features M must be > 0, got {}", features);
  auto form = three_point_form(e);
  require(form.has_value(),
          "estimator '{}' has no closed-form K-hat C moments (no three-point form): estimate them by simulation",
          e.info().name);
  in.form = std::move(*form);
  return in;
}

// The rows a result covers (rows_out) and the seed that drew them (None unless rows= was a number).
void row_fields(py::dict& out, const py::object& rows, const arma::uvec& r, std::uint64_t seed, arma::uword L) {
  const bool sampled = !rows.is_none() && !py::isinstance<py::str>(rows) && !py::isinstance<py::array>(rows) &&
                       !py::isinstance<py::list>(rows) && !py::isinstance<py::tuple>(rows);
  out["rows"] = rows_out(r, L);
  out["seed"] = sampled ? py::object(py::int_(seed)) : py::object(py::none());
}

// A matrix field of a draw from Python (None: empty), checked finite.
arma::mat draw_field(const py::object& v, const char* name) {
  if (v.is_none()) return {};
  arma::mat m = *mat_in(v, name);
  validate_points(m, name);
  return m;
}

void bind_draw(py::module_& m) {
  py::class_<Draw>(m, "Draw",
                   "M random objects: projections omega (d x M) and, for the cos form, phases (M); the discrete "
                   "families' counts (d x M); the hybrids' omega_trig (d x M) and tau (d x n). One meaning per field")
      .def(py::init([](const py::object& omega, const py::object& phase, const py::object& counts,
                       const py::object& omega_trig, const py::object& tau) {
             Draw w;
             w.omega = draw_field(omega, "omega");
             w.counts = draw_field(counts, "counts");
             w.omega_trig = draw_field(omega_trig, "omega_trig");
             w.tau = draw_field(tau, "tau");
             require(w.omega.is_empty() != w.counts.is_empty(), "a Draw has projections omega or counts (one of them)");
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
           py::arg("omega") = py::none(), py::arg("phase") = py::none(), py::kw_only(), py::arg("counts") = py::none(),
           py::arg("omega_trig") = py::none(), py::arg("tau") = py::none(), "A draw from given arrays (copied)")
      .def_property_readonly(
          "omega", [](py::object self) { return member_view(self.cast<Draw&>().omega, self); },
          "d x M projections, empty for the discrete families (a view into the draw, no copy)")
      .def_property_readonly(
          "phase", [](py::object self) { return member_view(self.cast<Draw&>().phase, self); },
          "M phases (TrigRF cos form), else empty (a view, no copy)")
      .def_property_readonly(
          "counts", [](py::object self) { return member_view(self.cast<Draw&>().counts, self); },
          "d x M per-coordinate counts of the discrete families (PoisRF, GeomRF), else empty (a view, no copy)")
      .def_property_readonly(
          "omega_trig", [](py::object self) { return member_view(self.cast<Draw&>().omega_trig, self); },
          "a hybrid's d x M projections of its trigonometric part (empty when shared with omega; a view, no copy)")
      .def_property_readonly(
          "tau", [](py::object self) { return member_view(self.cast<Draw&>().tau, self); },
          "a hybrid's d x n projections of its lambda features, else empty (a view, no copy)")
      .def_property_readonly("count", &Draw::count)
      .def(py::pickle(
          [](const Draw& w) {
            return py::make_tuple(mat_out(arma::mat(w.omega)), mat_out(arma::mat(w.phase)),
                                  mat_out(arma::mat(w.counts)), mat_out(arma::mat(w.omega_trig)),
                                  mat_out(arma::mat(w.tau)));
          },
          [](const py::tuple& t) {
            require(t.size() == 5, "a pickled Draw is (omega, phase, counts, omega_trig, tau), got {} items", t.size());
            Draw w;
            w.omega = *mat_in(t[0], "omega");
            const arma::mat phase = *mat_in(t[1], "phase");
            if (phase.n_elem) w.phase = arma::rowvec(phase.memptr(), phase.n_elem);
            w.counts = *mat_in(t[2], "counts");
            w.omega_trig = *mat_in(t[3], "omega_trig");
            w.tau = *mat_in(t[4], "tau");
            return w;
          }))
      .def("__repr__", [](const Draw& w) { return fmt::format("<kestrel.Draw d={} M={}>", w.dim(), w.count()); });
}

// Estimator: what it is and its state (name, kind, fitted parameters, pickling).
void bind_state(py::class_<Estimator>& c) {
  c.def_property_readonly("name", [](const Estimator& e) { return e.info().name; })
      .def_property_readonly(
          "complex", [](const Estimator& e) { return e.info().complex; },
          "a feature is Re(f1 f2) of complex f: two real columns per omega")
      .def_property_readonly("positive", [](const Estimator& e) { return e.info().positive; })
      .def_property_readonly("dim", &Estimator::dim)
      .def(
          "params", [](const Estimator& e) { return from_json(e.params()); }, "Fitted parameters as a dict")
      .def(
          "state", [](const Estimator& e) { return e.state().dump(); },
          "Everything that rebuilds this estimator exactly, as JSON text (kestrel.restore; pickling uses it)")
      .def(py::pickle([](const Estimator& e) { return py::make_tuple(e.state().dump()); },
                      [](const py::tuple& t) {
                        require(t.size() == 1, "a pickled Estimator is (state,), got {} items", t.size());
                        return restore_estimator(nlohmann::json::parse(t[0].cast<std::string>()));
                      }));
}

// Estimator: the exact variance of single kernel entries (log Var, log Var/K^2, their summary over pairs).
void bind_variance(py::class_<Estimator>& c) {
  c.def(
       "log_var_over_k2",
       [](const Estimator& e, const py::object& X, const py::object& Y, Int<"features", 1> features) {
         const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
         check_points(e, *x, "X"), check_points(e, *y, "Y");
         validate_pair(*x, *y, e.dim());
         arma::mat r;
         {
           py::gil_scoped_release nogil;
           r = features == 1 ? e.log_var_over_k2(*x, *y) : e.log_var_over_k2_m(*x, *y, features);
         }
         return mat_out(std::move(r));
       },
       py::arg("X"), py::arg("Y"), py::arg("features") = study_default("features"),
       "log(Var/K^2) of the M-feature estimate for all pairs: Lx x Ly (alpha-independent; -inf where exact)")
      .def(
          "log_variance",
          [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& kernel,
             Int<"features", 1> features, const Str<"sampler">& sampler) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            const Kernel k = kernel_of(kernel);
            const Sampler s = parse_sampler(sampler);
            check_points(e, *x, "X"), check_points(e, *y, "Y");
            arma::mat r;
            {
              py::gil_scoped_release nogil;
              r = s == Sampler::Iid ? log_variance(e, k, *x, *y, features)
                                    : coupled_log_variance(e, k, *x, *y, features, s);
            }
            return mat_out(std::move(r));
          },
          py::arg("X"), py::arg("Y"), py::arg("kernel") = study_default("kernel"),
          py::arg("features") = study_default("features"), py::arg("sampler") = study_default("sampler"),
          "log Var of the M-feature estimate of K^(alpha)(x_i, y_j): Lx x Ly. sampler: iid, or orthogonal / simplex "
          "(blocks of d coupled projections, exact for families with an isotropic form: "
          "lib/analysis/coupled_variance.hpp; ValueError for the others)")
      .def(
          "summarize_variance",
          [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& kernel,
             Int<"features", 1> features) {
            const MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
            const Kernel k = kernel_of(kernel);
            check_points(e, *x, "X"), check_points(e, *y, "Y");
            validate_pair(*x, *y, e.dim());
            PairwiseSummary s;
            {
              py::gil_scoped_release nogil;
              s = summarize_exact_variance(e, k, *x, *y, 256, features);
            }
            return summary_dict(s);
          },
          py::arg("X"), py::arg("Y"), py::arg("kernel") = study_default("kernel"),
          py::arg("features") = study_default("features"),
          "Mean and std of log Var and log(Var/K) over all pairs, streamed (exact pairs counted in n_exact and left "
          "out of the means; when every pair is exact the means are -inf)");
}

// Estimator: draws and features.
void bind_features(py::class_<Estimator>& c) {
  c.def(
       "draw",
       [](const Estimator& e, Int<"features", 1> features, Int<"seed"> seed, const Str<"sampler">& sampler,
          Int<"index"> index) {
         const Sampler s = parse_sampler(sampler);
         py::gil_scoped_release nogil;
         Rng rng(seed, Stream::Features, index);
         return e.draw(features, rng, s);
       },
       py::arg("features"), py::arg("seed") = study_default("seed"), py::arg("sampler") = study_default("sampler"),
       py::arg("index") = 0,
       "Draws M random objects from stream (seed, Features, index) (seed 1 unless given, as elsewhere); sampler: "
       "iid, orthogonal, simplex, structured, halton")
      .def(
          "features",
          [](const Estimator& e, const py::object& draw, const py::object& X, const Str<"side">& side) {
            const Draw& w = object_arg<Draw>(draw, "draw", "a kestrel.Draw (Estimator.draw)");
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
          [](const Estimator& e, const py::object& draw, const py::object& X, const Str<"side">& side,
             const py::object& kernel) {
            const Draw& w = object_arg<Draw>(draw, "draw", "a kestrel.Draw (Estimator.draw)");
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
          py::arg("draw"), py::arg("X"), py::arg("side") = "query", py::arg("kernel") = study_default("kernel"),
          "Features for K^(alpha): rows of features() scaled by exp(alpha |x_i|^2)");
}

// Estimator: the random-feature estimates of K and K C from one draw.
void bind_estimates(py::class_<Estimator>& c) {
  c.def(
       "approximate_kernel",
       [](const Estimator& e, const py::object& draw, const py::object& X, const py::object& Y,
          const py::object& kernel) {
         const Draw& w = object_arg<Draw>(draw, "draw", "a kestrel.Draw (Estimator.draw)");
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
       py::arg("draw"), py::arg("X"), py::arg("Y"), py::arg("kernel") = study_default("kernel"),
       "Unbiased estimate of K^(alpha)(X, Y) from one draw: Lx x Ly")
      .def(
          "approximate_kernel_times",
          [](const Estimator& e, const py::object& draw, const py::object& X, const py::object& Y, const py::object& C,
             const py::object& kernel) {
            const Draw& w = object_arg<Draw>(draw, "draw", "a kestrel.Draw (Estimator.draw)");
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
          py::arg("draw"), py::arg("X"), py::arg("Y"), py::arg("C"), py::arg("kernel") = study_default("kernel"),
          "Unbiased estimate of K^(alpha)(X, Y) C in O((Lx + Ly) M n): Lx x n");
}

// Estimator: the exact moments of K-hat C and the predicted attention error, per query row.
void bind_operators(py::class_<Estimator>& c) {
  c.def(
       "kc_variance",
       [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& C, const py::object& kernel,
          Int<"features", 1> features, const py::object& rows, Int<"seed"> seed) {
         const OperatorInputs in = operator_inputs(e, X, Y, C, "C", kernel, features);
         const arma::uvec r = rows_in(rows, seed, in.x->n_cols);
         KcMoments m;
         {
           py::gil_scoped_release nogil;
           m = kc_moments(in.form, in.k, *in.x, *in.y, *in.c, features, r);
         }
         py::dict out;
         out["log_var"] = mat_out(m.log_var());
         out["log_abs_kc"] = mat_out(std::move(m.log_abs_kc));
         out["sign_kc"] = mat_out(arma::conv_to<arma::mat>::from(m.sign_kc));
         row_fields(out, rows, r, seed, in.x->n_cols);
         return out;
       },
       py::arg("X"), py::arg("Y"), py::arg("C"), py::arg("kernel") = study_default("kernel"),
       py::arg("features") = study_default("features"), py::arg("rows") = py::none(),
       py::arg("seed") = study_default("seed"),
       "Exact variance of the M-feature estimate of K^(alpha)(X, Y) C (C: Ly x n) from the family's three-point "
       "form (lib/analysis/operator_variance.hpp): dict of log_var (rows x n, -inf where exact), log_abs_kc, "
       "sign_kc, rows (the query indices of the result's rows) and seed (None unless sampled). rows: None or 'all' "
       "(every query), an integer n (n distinct queries sampled with seed, sorted) or an array of distinct "
       "indices; each row is computed exactly as in the full computation, O(Ly^2 n) work and O(Ly) memory per row. "
       "ValueError for a family without a closed form or invalid rows")
      .def(
          "predict_attention",
          [](const Estimator& e, const py::object& X, const py::object& Y, const py::object& V,
             const py::object& kernel, Int<"features", 1> features, const py::object& rows, Int<"seed"> seed) {
            const OperatorInputs in = operator_inputs(e, X, Y, V, "V", kernel, features);
            const arma::uvec r = rows_in(rows, seed, in.x->n_cols);
            AttentionPrediction a;
            {
              py::gil_scoped_release nogil;
              a = predict_attention_error(in.form, e.info().positive, in.k, *in.x, *in.y, *in.c, features, r);
            }
            py::dict out;
            auto col = [](const arma::vec& c) { return mat_out(arma::mat(c)).attr("ravel")(); };
            out["log_mse"] = col(a.log_mse);
            out["log_norm_y"] = col(a.log_norm_y);
            out["log_bias"] = col(a.log_bias);
            out["log_rel_var"] = col(a.log_rel_var);
            out["p_nonpositive_bound"] = col(a.p_nonpositive_bound);
            out["outside"] = col(arma::conv_to<arma::vec>::from(a.outside)).attr("astype")("bool");
            out["Y"] = mat_out(std::move(a.Y));
            row_fields(out, rows, r, seed, in.x->n_cols);
            return out;
          },
          py::arg("X"), py::arg("Y"), py::arg("V"), py::arg("kernel") = study_default("kernel"),
          py::arg("features") = study_default("features"), py::arg("rows") = py::none(),
          py::arg("seed") = study_default("seed"),
          "Predicted error of the attention rows (K-hat V)_i / (K-hat 1)_i with M features, by the delta method from "
          "the exact moments (lib/analysis/attention_variance.hpp): dict of per-row arrays log_mse, log_norm_y, "
          "log_bias, log_rel_var (of the normaliser), p_nonpositive_bound, outside (rows beyond the method's range), "
          "the exact output Y (rows x dv), rows (the query indices) and seed (None unless sampled). rows as in "
          "kc_variance; O(Ly^2) work per row whatever dv is");
}

// The module functions over the registry: kestrel.estimators, restore, default_estimator, draws_for_budget, fit.
void bind_registry_functions(py::module_& m) {
  m.def(
      "estimators",
      [] {
        py::dict d;
        for (const auto& f : estimator_families()) d[py::str(f.name)] = f.description;
        return d;
      },
      "The estimator names (as `kestrel estimators`) with their descriptions");
  m.def(
      "restore",
      [](const std::string& state) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(state);
        } catch (const nlohmann::json::parse_error& e) {
          std::string head = state.substr(0, 40);  // shown whole or cut before a multi-byte character
          while (state.size() > 40 && !head.empty() && (static_cast<unsigned char>(head.back()) & 0x80))
            head.pop_back();
          throw InvalidArgument(
              fmt::format("restore: '{}{}' is not an estimator state (not JSON text: invalid at character {}); pass "
                          "the text that Estimator.state() returned",
                          head, state.size() > 40 ? "..." : "", e.byte));
        }
        return restore_estimator(j);
      },
      py::arg("state"), "The estimator whose Estimator.state() this is (bit for bit the same estimator)");
  m.def("default_estimator", &default_feature_estimator,
        "The family feature maps use when none is named (kestrel.sklearn.RandomFeatures): the registry's choice");
  m.def(
      "draws_for_budget",
      [](const Str<"name">& name, Int<"features", 1> features) { return draws_for_budget(name, features); },
      py::arg("name"), py::arg("features"),
      "The draws the named family takes for a budget of M real feature columns (M/2 for complex features, M/8 for "
      "the hybrids, ...)");
  m.def(
      "fit",
      [](const Str<"name">& name, const py::object& X, const py::object& Y, const py::object& layout) {
        const std::string how = layout.is_none() ? "" : str_arg(layout, "layout");
        require(how.empty() || how == "columns" || how == "rows", "layout must be 'columns' or 'rows', got '{}'", how);
        MatIn x = mat_in(X, "X"), y = mat_in(Y, "Y");
        find_estimator_family(name);
        if (how == "rows") x.m = arma::mat(x->t()), y.m = arma::mat(y->t());
        require_points(*x, "X"), require_points(*y, "Y");
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
}

}  // namespace

void bind_estimators(py::module_& m) {
  bind_draw(m);
  py::class_<Estimator> c(m, "Estimator",
                          "A random-feature estimator with its parameters fitted on a pair of sets (kestrel.fit)");
  bind_state(c);
  bind_variance(c);
  bind_features(c);
  bind_estimates(c);
  bind_operators(c);
  c.def("__repr__",
        [](const Estimator& e) { return fmt::format("<kestrel.Estimator {} d={}>", e.info().name, e.dim()); });
  bind_registry_functions(m);
}

}  // namespace kestrel::python
