// Variance study over regimes, sigmas and estimators (see variance_study.hpp); its rows as a table of columns are
// result_table.cpp's.
#include "analysis/variance_study.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "analysis/attention_variance.hpp"
#include "analysis/coupled_variance.hpp"
#include "analysis/montecarlo.hpp"
#include "analysis/operator_variance.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"

namespace kestrel {

void validate(const VarianceStudyOptions& opt) {
  validate_regime(opt.regime);
  require(!opt.sigmas.empty(), "at least one sigma is needed");
  for (double s : opt.sigmas) require(std::isfinite(s) && s > 0, "sigma must be > 0, got {}", s);
  require(opt.dim > 0, "dimension d must be > 0, got {}", opt.dim);
  require(opt.points > 0, "number of points L must be > 0, got {}", opt.points);
  require(opt.pairs > 0, "number of set pairs must be > 0, got {}", opt.pairs);
  require(opt.features > 0, "number of features M must be > 0, got {}", opt.features);
  require(!opt.estimators.empty(), "at least one estimator is needed");
  for (const auto& e : opt.estimators) find_estimator_family(e);
  require(std::isfinite(opt.kernel.alpha), "kernel alpha must be finite, got {}", opt.kernel.alpha);
  require(opt.mc_reps == 0 || opt.mc_reps >= 4, "Monte Carlo needs at least 4 repetitions, got {}", opt.mc_reps);
  require(opt.mc_reps == 0 || opt.mc_points <= opt.points, "--mc-points {} is more than --points {}", opt.mc_points,
          opt.points);
  require(std::find(kValueKinds.begin(), kValueKinds.end(), opt.values) != kValueKinds.end(),
          "values must be normal, uniform or ones, got '{}'", opt.values);
  require(opt.value_dim > 0, "value-dim must be > 0, got 0");
}

arma::mat study_values(const VarianceStudyOptions& opt, arma::uword Ly, std::uint64_t set_index) {
  if (opt.values == "ones") return arma::ones(Ly, opt.value_dim);
  Rng rng(opt.seed, Stream::Values, set_index);
  arma::mat V(Ly, opt.value_dim);
  for (double& v : V) v = opt.values == "normal" ? rng.normal() : rng.uniform();
  return V;
}

arma::uword mc_points_used(const VarianceStudyOptions& opt) {
  return opt.mc_points ? opt.mc_points : std::min<arma::uword>(64, opt.points);
}

nlohmann::json study_inputs(const VarianceStudyOptions& opt) {
  nlohmann::json j = regime_inputs(opt.regime_options, find_regime(opt.regime).images);
  j["halve_real_rule"] = kHalveRealRule;
  return j;
}

namespace {

// The exact log variance of what the simulation drew: the sampler's (coupled_variance.hpp: orthogonal and simplex
// blocks for the families with an isotropic form), else the iid one, which acc then says (iid_reference).
arma::mat reference_log_variance(const Estimator& e, const VarianceStudyOptions& opt, const arma::mat& X,
                                 const arma::mat& Y, arma::uword M, McSummary& acc) {
  try {
    return coupled_log_variance(e, opt.kernel, X, Y, M, opt.sampler);
  } catch (const InvalidArgument&) {
    acc.iid_reference = true;
    return log_variance(e, opt.kernel, X, Y, M);
  }
}

McSummary monte_carlo(const Estimator& e, const SetPair& sp, const VarianceStudyOptions& opt, arma::uword M,
                      std::uint64_t set_index, McSummary acc) {
  const arma::uword n = mc_points_used(opt);
  const arma::mat X = sp.X.cols(0, n - 1), Y = sp.Y.cols(0, n - 1);
  MonteCarloOptions mo{opt.mc_reps, M, opt.seed ^ mix64(set_index + 1), opt.sampler};
  const MonteCarloResult r = simulate(e, opt.kernel, X, Y, mo);
  const arma::mat exact = reference_log_variance(e, opt, X, Y, M, acc);
  double within = acc.frac_var_within_3se * acc.entries;
  for (arma::uword k = 0; k < exact.n_elem; ++k) {
    const double v = r.kernel.variance(k), se_m = r.kernel.se_mean(k);
    if (se_m > 0)
      acc.max_abs_z_mean = std::max(acc.max_abs_z_mean, std::abs(r.kernel.mean(k) - r.kernel.exact(k)) / se_m);
    const double ve = std::exp(exact(k));
    if (std::abs(v - ve) < 3 * r.kernel.se_variance(k) || (v == 0 && exact(k) == -kInf)) within += 1;
    ++acc.entries;
    if (v > 0 && exact(k) > -kInf) {
      acc.log_var_mc.add(std::log(v));
      acc.log_var_exact.add(exact(k));
    }
  }
  acc.frac_var_within_3se = within / acc.entries;
  return acc;
}

// The summary of kEmpiricalReps Monte Carlo repetitions, for families without an exact variance (see the header).
PairwiseSummary empirical_summary(const Estimator& e, const SetPair& sp, const VarianceStudyOptions& opt, arma::uword M,
                                  std::uint64_t set_index) {
  const arma::uword n = mc_points_used(opt);
  const arma::mat X = sp.X.cols(0, n - 1), Y = sp.Y.cols(0, n - 1);
  const MonteCarloOptions mo{kEmpiricalReps, M, opt.seed ^ mix64(set_index + 1), opt.sampler};
  const arma::mat var = simulate(e, opt.kernel, X, Y, mo).kernel.variance;
  const arma::mat lk = log_kernel(opt.kernel, X, Y);
  PairwiseSummary s;
  for (arma::uword k = 0; k < var.n_elem; ++k) {
    s.log_kernel.add(lk(k));
    if (var(k) == 0) {
      ++s.n_exact;
      continue;
    }
    s.log_var.add(std::log(var(k)));
    s.log_rel_var.add(std::log(var(k)) - lk(k));
  }
  return s;
}

// Adds one Monte Carlo comparison per entry: the empirical variance (or MSE) v with its standard error against the
// exact (or predicted) log value.
void add_mc_entries(McSummary& acc, const arma::mat& v, const arma::mat& se, const arma::mat& exact) {
  double within = acc.frac_var_within_3se * acc.entries;
  for (arma::uword k = 0; k < exact.n_elem; ++k) {
    if (std::abs(v(k) - std::exp(exact(k))) < 3 * se(k) || (v(k) == 0 && exact(k) == -kInf)) within += 1;
    ++acc.entries;
    if (v(k) > 0 && exact(k) > -kInf) {
      acc.log_var_mc.add(std::log(v(k)));
      acc.log_var_exact.add(exact(k));
    }
  }
  acc.frac_var_within_3se = within / acc.entries;
}

void add_entries(PairwiseSummary& s, const arma::mat& log_var, const arma::mat& log_size) {
  for (arma::uword k = 0; k < log_var.n_elem; ++k) {
    s.log_kernel.add(log_size(k));
    if (log_var(k) == -kInf) {
      ++s.n_exact;
      continue;
    }
    s.log_var.add(log_var(k));
    s.log_rel_var.add(log_var(k) - log_size(k));
  }
}

// Exact Y = (K V) / (K 1) row by row, and log |Y_i|.
arma::vec log_attention_norms(const Kernel& k, const arma::mat& X, const arma::mat& Y, const arma::mat& V) {
  const arma::mat NC = kernel_times(k, X, Y, arma::join_rows(V, arma::ones(V.n_rows)));
  arma::mat out = NC.head_cols(V.n_cols);
  out.each_col() /= NC.col(V.n_cols);
  return 0.5 * arma::log(arma::sum(arma::square(out), 1));
}

// --quantity kc / attention on one set pair (see the header): exact where the family has a three-point form
// (estimators/three_point.hpp), else the simulator's estimate (kEmpiricalReps on the first mc_points_used points, as
// for pair variances without an exact formula; `empirical` is set). With --mc the exact values are checked against
// the simulator on the first mc_points_used points (attention: on the rows inside the delta method's range).
PairwiseSummary operator_summary(const Estimator& e, const SetPair& sp, const VarianceStudyOptions& opt, arma::uword M,
                                 std::uint64_t p, bool& empirical, std::optional<McSummary>& mc) {
  const auto form = three_point_form(e);
  empirical = !form;
  const arma::uword n = mc_points_used(opt);
  const arma::mat Xs = sp.X.cols(0, n - 1), Ys = sp.Y.cols(0, n - 1);
  const arma::mat V = study_values(opt, sp.Y.n_cols, p), Vs = V.rows(0, n - 1);
  const MonteCarloOptions mo{empirical ? kEmpiricalReps : opt.mc_reps, M, opt.seed ^ mix64(p + 1), opt.sampler};
  const bool check = !empirical && opt.mc_reps > 0;
  PairwiseSummary s;
  if (opt.quantity == Quantity::Kc) {
    if (empirical) {
      const EntryMoments r = *simulate(e, opt.kernel, Xs, Ys, mo, &Vs).kernel_times;
      add_entries(s, arma::log(r.variance), arma::log(arma::abs(r.exact)));
      return s;
    }
    const KcMoments m = kc_moments(*form, opt.kernel, sp.X, sp.Y, V, M);
    add_entries(s, m.log_var(), m.log_abs_kc);
    if (check) {
      const EntryMoments r = *simulate(e, opt.kernel, Xs, Ys, mo, &Vs).kernel_times;
      if (!mc) mc = McSummary{};
      add_mc_entries(*mc, r.variance, r.se_variance, kc_moments(*form, opt.kernel, Xs, Ys, Vs, M).log_var());
    }
    return s;
  }
  if (empirical) {
    const AttentionMeasurement m = simulate_attention(e, opt.kernel, Xs, Ys, Vs, mo);
    add_entries(s, arma::log(m.mse), log_attention_norms(opt.kernel, Xs, Ys, Vs));
    return s;
  }
  const AttentionPrediction a = predict_attention_error(*form, e.info().positive, opt.kernel, sp.X, sp.Y, V, M);
  add_entries(s, a.log_mse, a.log_norm_y);
  s.n_flagged = arma::accu(a.outside);
  if (check) {  // only rows inside the delta method's range: elsewhere the prediction is not expected to hold
    const AttentionPrediction sub = predict_attention_error(*form, e.info().positive, opt.kernel, Xs, Ys, Vs, M);
    const arma::uvec inside = arma::find(sub.outside == 0);
    if (!inside.is_empty()) {
      const AttentionMeasurement m = simulate_attention(e, opt.kernel, Xs, Ys, Vs, mo);
      if (!mc) mc = McSummary{};
      add_mc_entries(*mc, m.mse(inside), m.se_mse(inside), sub.log_mse(inside));
    }
  }
  return s;
}

}  // namespace

Status parse_status(const std::string& s) {
  if (const std::optional<Status> t = find_enum<Status>(s)) return *t;
  throw IoError(fmt::format("unknown result status '{}' (expected {})", s, enum_choices<Status>()));
}

namespace {

// One estimator of a set pair, made before any is studied: the estimator, or the error that stopped it; and for an
// exact pairwise variance its summary, formed with the set pair's other such estimators (summarize_exact_variances).
struct Prepared {
  std::unique_ptr<Estimator> e;
  std::exception_ptr error;
  std::optional<SummaryOrError> exact;
};

arma::uword study_features(const std::string& name, const VarianceStudyOptions& opt) {
  return opt.features * (opt.halve_real && halved_by_halve_real(name) ? 2 : 1);
}

// The estimators of the rows still ok, and the exact pairwise summaries of those with an exact variance, their tiles'
// Gram products and kernels shared.
std::vector<Prepared> prepare(const std::vector<VarianceResult>& row, const VarianceStudyOptions& opt,
                              const SetPair& sp) {
  std::vector<Prepared> out(row.size());
  std::vector<const Estimator*> exact;
  std::vector<arma::uword> Ms;
  std::vector<std::size_t> which;
  for (std::size_t k = 0; k < row.size(); ++k) {
    if (row[k].status != Status::Ok) continue;
    try {
      out[k].e = make_estimator(opt.estimators[k], sp.X, sp.Y);
    } catch (...) {
      out[k].error = std::current_exception();
      continue;
    }
    if (opt.quantity == Quantity::Pair && find_family(opt.estimators[k]).exact_variance) {
      exact.push_back(out[k].e.get());
      Ms.push_back(study_features(opt.estimators[k], opt));
      which.push_back(k);
    }
  }
  if (!exact.empty()) {
    std::vector<SummaryOrError> s(exact.size());
    try {
      s = summarize_exact_variances(exact, opt.kernel, sp.X, sp.Y, 256, Ms);
    } catch (...) {  // not one estimator's (the shared kernel's, say): each of them records it, as before the sharing
      for (auto& r : s) r.error = std::current_exception();
    }
    for (std::size_t i = 0; i < which.size(); ++i) out[which[i]].exact = std::move(s[i]);
  }
  return out;
}

// One estimator on one set pair; an undefined estimator or a numerical failure marks the row.
void study_one(VarianceResult& row, const std::string& name, const SetPair& sp, const VarianceStudyOptions& opt,
               arma::uword p, const Prepared& prep) {
  try {
    if (prep.error) std::rethrow_exception(prep.error);
    const Estimator& e = *prep.e;
    const arma::uword M = study_features(name, opt);
    row.features = M;
    bool exact = find_family(name).exact_variance;
    PairwiseSummary s;
    if (opt.quantity == Quantity::Pair) {
      if (exact) {
        if (prep.exact->error) std::rethrow_exception(prep.exact->error);
        s = prep.exact->summary;
      } else {
        s = empirical_summary(e, sp, opt, M, p);
      }
    } else {
      bool empirical = false;
      s = operator_summary(e, sp, opt, M, p, empirical, row.mc);
      exact = !empirical;
    }
    if (!exact) row.empirical_reps = kEmpiricalReps;
    if (s.log_var.n > 0 && !std::isfinite(s.log_var.mean)) {
      row.status = Status::Undefined;
      row.reason = fmt::format("infinite variance at set pair {}", p);
      return;
    }
    row.summary.merge(s);
    row.per_set.push_back(s);
    row.params.push_back(e.params());
    if (opt.mc_reps > 0 && exact && opt.quantity == Quantity::Pair)
      row.mc = monte_carlo(e, sp, opt, M, p, row.mc.value_or(McSummary{}));
  } catch (const Undefined& err) {
    row.status = Status::Undefined;
    row.reason = err.what();
  } catch (const NumericalError& err) {
    row.status = Status::Failed;
    row.reason = fmt::format("set pair {}: {}", p, err.what());
  }
}

// Logs of the scaled kernel are alpha (|x|^2 + |y|^2) + x^T y: alpha |x|^2 has the bound draw_regime puts on |x|^2,
// and the refusal names alpha, the user's option (sigma has its own in draw_regime). Checked before computing.
void require_representable(const Kernel& k, const SetPair& sp, double sigma) {
  const double m = std::max(arma::max(arma::sum(arma::square(sp.X), 0)), arma::max(arma::sum(arma::square(sp.Y), 0)));
  require(std::abs(k.alpha) * m < kMaxScaledNorm2,
          "kernel alpha = {:g} is too large for these points: |alpha| times the largest |x|^2 is {:g} at sigma = {} "
          "(at most {:g} is supported)",
          k.alpha, std::abs(k.alpha) * m, sigma, kMaxScaledNorm2);
}

}  // namespace

std::vector<VarianceResult> run_variance_study(const VarianceStudyOptions& opt, const Progress& progress) {
  validate(opt);
  std::vector<VarianceResult> out;
  const std::size_t steps = opt.sigmas.size() * opt.pairs;
  std::size_t step = 0;
  for (double sigma : opt.sigmas) {
    std::vector<VarianceResult> row(opt.estimators.size());
    for (std::size_t k = 0; k < row.size(); ++k) row[k].estimator = opt.estimators[k], row[k].sigma = sigma;
    for (arma::uword p = 0; p < opt.pairs; ++p) {
      if (progress)
        progress(fmt::format("{}/{} {} sigma={} set pair {}/{}", ++step, steps, opt.regime, sigma, p + 1, opt.pairs));
      const SetPair sp = draw_regime({.name = opt.regime,
                                      .dim = opt.dim,
                                      .points = opt.points,
                                      .sigma = sigma,
                                      .seed = opt.seed,
                                      .pair_index = p,
                                      .options = opt.regime_options});
      require_representable(opt.kernel, sp, sigma);
      const std::vector<Prepared> prep = prepare(row, opt, sp);
      for (std::size_t k = 0; k < row.size(); ++k)
        if (row[k].status == Status::Ok) study_one(row[k], opt.estimators[k], sp, opt, p, prep[k]);
    }
    for (auto& r : row) {
      if (r.status == Status::Ok && r.summary.log_var.n == 0) {
        r.status = Status::Exact;
        r.reason = "zero variance at every pair (log Var = -inf)";
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace kestrel

namespace kestrel {

bool mc_reference_is_iid(const std::string& estimator, Sampler sampler) {
  if (sampler == Sampler::Iid) return false;
  if (sampler != Sampler::Orthogonal && sampler != Sampler::Simplex) return true;
  try {
    return !find_family(estimator).has_isotropic_form;
  } catch (const InvalidArgument&) {
    return true;
  }
}

namespace {

// "oprf sigma=1, pos sigma=1" (with d, L and M when the rows are of several grid points).
std::string row_names(const std::vector<const ResultRow*>& rows) {
  std::string out;
  for (const ResultRow* r : rows) {
    const bool grid = std::any_of(rows.begin(), rows.end(), [&](const ResultRow* o) {
      return o->dim != r->dim || o->points != r->points || o->features != r->features;
    });
    out += fmt::format("{}{} {}sigma={:g}", out.empty() ? "" : ", ", r->estimator,
                       grid ? fmt::format("d={} L={} M={} ", r->dim, r->points, r->features) : "", r->sigma);
  }
  return out;
}

}  // namespace

bool mc_compared_with_iid(const ResultRow& r, Sampler sampler) {
  return sampler != Sampler::Iid && (r.quantity != "pair" || mc_reference_is_iid(r.estimator, sampler));
}

const char* mc_mark(const ResultRow& r, Sampler sampler) {
  if (!r.mc || r.mc->trusted) return "";
  if (mc_compared_with_iid(r, sampler)) return " MC VS IID EXACT";
  return r.quantity == "attention" ? " PREDICTION OFF" : " MC UNTRUSTED";
}

std::string mc_verdict(const std::vector<ResultRow>& rows, Sampler sampler) {
  std::vector<const ResultRow*> off, vs_iid;
  for (const auto& r : rows) {
    if (!r.mc || r.mc->trusted) continue;
    (mc_compared_with_iid(r, sampler) ? vs_iid : off).push_back(&r);
  }
  std::string out;
  const bool attention = !rows.empty() && rows.front().quantity == "attention";
  const std::string of =
      sampler == Sampler::Iid ? "" : fmt::format(" of the {} projections simulated", to_string(sampler));
  if (!off.empty() && attention)
    out += fmt::format(
        "[kestrel] warning: the delta method's attention error disagrees with simulation for {}: fewer than {:g}% "
        "of the rows inside its range lie within 3 SE of the prediction. Heavy-tailed features make its remainder "
        "shrink slowly with M; read the simulated MSE (MC log Var) there.\n",
        row_names(off), 100 * McSummary::kMcTrustedShare);
  else if (!off.empty())
    out += fmt::format(
        "[kestrel] warning: Monte Carlo variance untrusted for {}: fewer than {:g}% of entries lie within 3 SE of the "
        "exact variance{}. The estimate is heavy-tailed there, so its sample variance (and its SE, which needs the "
        "fourth moment) is dominated by rare huge values; trust the exact {}.\n",
        row_names(off), 100 * McSummary::kMcTrustedShare, of,
        sampler == Sampler::Iid ? std::string("column")
                                : fmt::format("variance of the {} projections (the exact(sub) column; the log Var "
                                              "column is that of iid projections)",
                                              to_string(sampler)));
  if (!vs_iid.empty())
    out += fmt::format(
        "[kestrel] warning: Monte Carlo with --sampler {} differs from the iid exact variance for {}: kestrel has no "
        "exact {} variance of these {} to compare with (only of pair variances of the TrigRF/PosRF/OPRF/GERF family "
        "with orthogonal or simplex blocks), so the difference may be the sampler's effect, not heavy tails.\n",
        to_string(sampler), row_names(vs_iid), to_string(sampler), attention ? "rows" : "entries");
  return out;
}

}  // namespace kestrel
