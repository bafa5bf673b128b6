// Variance study over regimes, sigmas and estimators (see variance_study.hpp).
#include "analysis/variance_study.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "analysis/attention_variance.hpp"
#include "analysis/montecarlo.hpp"
#include "analysis/operator_variance.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"
#include "io/hdf5.hpp"

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

McSummary monte_carlo(const Estimator& e, const SetPair& sp, const VarianceStudyOptions& opt, arma::uword M,
                      std::uint64_t set_index, McSummary acc) {
  const arma::uword n = mc_points_used(opt);
  const arma::mat X = sp.X.cols(0, n - 1), Y = sp.Y.cols(0, n - 1);
  MonteCarloOptions mo{opt.mc_reps, M, opt.seed ^ mix64(set_index + 1), opt.sampler};
  const MonteCarloResult r = simulate(e, opt.kernel, X, Y, mo);
  const arma::mat exact = log_variance(e, opt.kernel, X, Y, M);
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

ResultRow result_row(const VarianceResult& r, const VarianceStudyOptions& opt) {
  ResultRow row{.estimator = r.estimator,
                .quantity = to_string(opt.quantity),
                .status = r.status,
                .reason = r.status == Status::Ok ? "" : r.reason,
                .regime = opt.regime,
                .kernel = opt.kernel.name(),
                .sigma = r.sigma,
                .dim = opt.dim,
                .points = opt.points,
                .features = r.features,
                .params = r.params,
                .empirical_reps = r.empirical_reps,
                .empirical_points = r.empirical_reps ? mc_points_used(opt) : 0};
  if (r.status == Status::Ok || r.status == Status::Exact) {
    row.n_pairs = static_cast<std::uint64_t>(r.summary.log_kernel.n);
    row.n_exact = r.summary.n_exact;
  }
  if (r.status != Status::Ok) return row;
  row.mean_log_var = r.summary.log_var.mean;
  row.std_log_var = r.summary.log_var.stddev();
  row.mean_log_rel_var = r.summary.log_rel_var.mean;
  row.std_log_rel_var = r.summary.log_rel_var.stddev();
  row.mean_log_kernel = r.summary.log_kernel.mean;
  for (const auto& s : r.per_set) row.mean_log_var_per_set.push_back(s.log_var.mean);
  row.n_flagged = r.summary.n_flagged;
  if (r.mc)
    row.mc = McRow{.reps = opt.mc_reps,
                   .points = mc_points_used(opt),
                   .entries = r.mc->entries,
                   .mean_log_var = r.mc->log_var_mc.mean,
                   .std_log_var = r.mc->log_var_mc.stddev(),
                   .exact_mean_log_var = r.mc->log_var_exact.mean,
                   .max_abs_z_mean = r.mc->max_abs_z_mean,
                   .frac_var_within_3se = r.mc->frac_var_within_3se,
                   .trusted = r.mc->trusted()};
  return row;
}

namespace {

// Accessors of one field of ResultRow or of its Monte Carlo block McRow, generated from the member pointer.
template <class C, class T>
C class_of(T C::*);
template <auto F>
auto& field(ResultRow& r) {
  if constexpr (std::is_same_v<decltype(class_of(F)), McRow>) {
    if (!r.mc) r.mc.emplace();
    return (*r.mc).*F;
  } else {
    return r.*F;
  }
}
template <auto F>
auto field_value(const ResultRow& r) {
  if constexpr (std::is_same_v<decltype(class_of(F)), McRow>)
    return r.mc ? (*r.mc).*F : decltype((*r.mc).*F){};
  else
    return r.*F;
}
template <auto F>
ResultColumn real(const char* name, const char* json, const char* help, const char* units, ColumnWhen when) {
  return {name,
          json,
          help,
          units,
          ColumnType::Real,
          when,
          [](const ResultRow& r) { return static_cast<double>(field_value<F>(r)); },
          [](ResultRow& r, double v) { field<F>(r) = v; },
          nullptr,
          nullptr};
}
template <auto F>
ResultColumn count(const char* name, const char* json, const char* help, const char* units, ColumnWhen when,
                   ColumnType type = ColumnType::Count) {
  using T = std::remove_reference_t<decltype(field<F>(std::declval<ResultRow&>()))>;
  return {name,
          json,
          help,
          units,
          type,
          when,
          nullptr,
          nullptr,
          [](const ResultRow& r) { return static_cast<std::uint64_t>(field_value<F>(r)); },
          [](ResultRow& r, std::uint64_t v) { field<F>(r) = static_cast<T>(v); }};
}
ResultColumn shown(ResultColumn c, CliFormat f, const char* header, const char* spread = "") {
  c.cli = f, c.cli_header = header, c.spread = spread;
  return c;
}

bool carries(const ResultColumn& c, const ResultRow& r) {
  switch (c.when) {
    case ColumnWhen::Always:
      return true;
    case ColumnWhen::Counted:
      return r.status == Status::Ok || r.status == Status::Exact;
    case ColumnWhen::Ok:
      return r.status == Status::Ok;
    case ColumnWhen::Attention:
      return r.status == Status::Ok && r.quantity == "attention";
    case ColumnWhen::Mc:
      return r.status == Status::Ok && r.mc.has_value();
  }
  return false;
}

nlohmann::json column_json(const ResultColumn& c, const ResultRow& r) {
  if (c.type == ColumnType::Real) return c.real(r);
  if (c.type == ColumnType::Flag) return c.count(r) != 0;
  return c.count(r);
}

void column_from_json(const ResultColumn& c, ResultRow& r, const nlohmann::json& j, bool required) {
  if (!required && !j.contains(c.json)) return;
  const nlohmann::json& v = j.at(c.json);
  if (c.type == ColumnType::Real)
    c.set_real(r, v.get<double>());
  else if (c.type == ColumnType::Flag)
    c.set_count(r, v.get<bool>());
  else
    c.set_count(r, v.get<std::uint64_t>());
}

}  // namespace

// The one table of measured columns. Order: HDF5 writing order (the Monte Carlo columns after the per-set means).
const std::vector<ResultColumn>& result_columns() {
  using C = ColumnWhen;
  static const std::vector<ResultColumn> t = {
      real<&ResultRow::sigma>("sigma", "sigma", "scale sigma of the inputs", "", C::Always),
      shown(real<&ResultRow::mean_log_var>(
                "mean_log_var", "mean_log_var",
                "mean over pairs of log Var of the M-feature estimate (natural log; exact pairs left out)",
                "natural log", C::Ok),
            CliFormat::MeanStd, "log {Var}", "std_log_var"),
      real<&ResultRow::std_log_var>("std_log_var", "std_log_var", "standard deviation over pairs of log Var",
                                    "natural log", C::Ok),
      shown(real<&ResultRow::mean_log_rel_var>("mean_log_rel_var", "mean_log_rel_var",
                                               "mean over pairs of log(Var/K) (DERF 5.1)", "natural log", C::Ok),
            CliFormat::MeanStd, "log({Var}/{K})", "std_log_rel_var"),
      real<&ResultRow::std_log_rel_var>("std_log_rel_var", "std_log_rel_var",
                                        "standard deviation over pairs of log(Var/K)", "natural log", C::Ok),
      real<&ResultRow::mean_log_kernel>("mean_log_kernel", "mean_log_kernel", "mean over pairs of log K", "natural log",
                                        C::Ok),
      count<&ResultRow::dim>("dim", "d", "dimension d", "count", C::Always),
      count<&ResultRow::points>("points", "L", "points per set L", "count", C::Always),
      count<&ResultRow::features>("features", "features",
                                  "features M of this estimator (2M for real-valued families with halve-real)", "count",
                                  C::Always),
      count<&ResultRow::n_pairs>("n_pairs", "n_pairs", "point pairs summarised", "count", C::Counted),
      count<&ResultRow::n_exact>("n_exact", "n_exact",
                                 "pairs with zero variance (log Var = -inf), left out of the means", "count",
                                 C::Counted),
      count<&ResultRow::n_flagged>(
          "n_flagged", "n_flagged",
          "quantity attention: rows outside the delta method's range (normaliser's relative variance > 0.01, or "
          "the prediction above the bound every draw obeys); 0 for the other quantities",
          "count", C::Attention),
      count<&McRow::reps>("", "reps", "Monte Carlo repetitions", "count", C::Mc),
      count<&McRow::points>("", "points", "Monte Carlo: points of each set simulated", "count", C::Mc),
      count<&McRow::entries>("", "entries", "Monte Carlo: entries compared", "count", C::Mc),
      shown(real<&McRow::mean_log_var>("mean_log_var", "mean_log_var",
                                       "Monte Carlo: mean log of the empirical variance", "natural log", C::Mc),
            CliFormat::Number, "MC log Var"),
      real<&McRow::std_log_var>("", "std_log_var", "Monte Carlo: standard deviation of the log empirical variance",
                                "natural log", C::Mc),
      shown(
          real<&McRow::exact_mean_log_var>("exact_mean_log_var", "exact_mean_log_var",
                                           "Monte Carlo: exact mean log Var on the same entries", "natural log", C::Mc),
          CliFormat::Number, "exact(sub)"),
      real<&McRow::max_abs_z_mean>("max_abs_z_mean", "max_abs_z_mean",
                                   "Monte Carlo: max over entries of |mean - K| / SE", "", C::Mc),
      shown(real<&McRow::frac_var_within_3se>(
                "frac_var_within_3se", "frac_var_within_3se",
                "Monte Carlo: share of entries whose empirical variance is within 3 SE of the exact", "share", C::Mc),
            CliFormat::Percent, "in 3se"),
      count<&McRow::trusted>("trusted", "trusted", "", "1/0", C::Mc, ColumnType::Flag),
  };
  return t;
}

nlohmann::json to_json(const ResultRow& r) {
  nlohmann::json j = {
      {"estimator", r.estimator}, {"quantity", r.quantity}, {"status", to_string(r.status)},
      {"regime", r.regime},       {"kernel", r.kernel},     {"params", r.params},
  };
  if (r.status != Status::Ok) j["reason"] = r.reason;
  if (r.empirical_reps) {
    j["variance"] = "empirical";
    j["empirical_reps"] = r.empirical_reps;
    j["empirical_points"] = r.empirical_points;
  }
  if (r.status == Status::Ok) j["mean_log_var_per_set"] = r.mean_log_var_per_set;
  for (const auto& c : result_columns())
    if (carries(c, r)) (c.when == ColumnWhen::Mc ? j["mc"][c.json] : j[c.json]) = column_json(c, r);
  return j;
}

ResultRow row_from_json(const nlohmann::json& j) {
  ResultRow r{.estimator = j.at("estimator").get<std::string>(),
              .quantity = j.value("quantity", "pair"),
              .status = parse_status(j.at("status").get<std::string>()),
              .reason = j.value("reason", ""),
              .regime = j.at("regime").get<std::string>(),
              .kernel = j.at("kernel").get<std::string>(),
              .params = j.at("params"),
              .empirical_reps = j.value<std::size_t>("empirical_reps", 0),
              .empirical_points = j.value<arma::uword>("empirical_points", 0)};
  if (r.status == Status::Ok) r.mean_log_var_per_set = j.at("mean_log_var_per_set").get<std::vector<double>>();
  for (const auto& c : result_columns()) {
    if (c.when == ColumnWhen::Mc) {
      if (r.status == Status::Ok && j.contains("mc")) column_from_json(c, r, j["mc"], true);
    } else {
      // Present when the row carries it (the attention flag count is optional: older checkpoints lack it).
      const bool required = c.when == ColumnWhen::Always || (c.when == ColumnWhen::Ok && r.status == Status::Ok);
      if (c.when == ColumnWhen::Always || c.when == ColumnWhen::Counted || r.status == Status::Ok)
        column_from_json(c, r, j, required);
    }
  }
  return r;
}

std::string undefined_summary(const std::vector<ResultRow>& rows) {
  std::size_t bad = 0;
  std::string shown;
  for (const auto& r : rows) {
    if (r.status == Status::Ok || r.status == Status::Exact) continue;
    if (++bad <= 5)
      shown += fmt::format("{}{} {} at d={} L={} M={} sigma={:g}: {}", bad > 1 ? "; " : "", r.estimator,
                           to_string(r.status), r.dim, r.points, r.features, r.sigma, r.reason);
  }
  if (bad == 0) return "";
  return fmt::format(
      "{} of {} results undefined or failed (recorded with their reason; the others are complete): "
      "{}{}",
      bad, rows.size(), shown, bad > 5 ? fmt::format("; and {} more", bad - 5) : "");
}

namespace {
std::string quantity_description(const std::string& q) {
  if (q == "kc")
    return "kc: the summarised entries are the rows x columns of K-hat V (V: options.values, options.value_dim); "
           "'pairs' are those entries, Var is Var((K-hat V)_ia), K is |(K V)_ia|";
  if (q == "attention")
    return "attention: the summarised entries are the rows of Y-hat = K-hat V / K-hat 1; 'pairs' are rows, Var is the "
           "delta method's MSE E|Y-hat_i - Y_i|^2 (analysis/attention_variance.hpp), K is |Y_i|";
  return "pair: the summarised entries are the point pairs (x_i, y_j); Var is Var(K-hat(x_i, y_j)), K is K(x_i, y_j)";
}
}  // namespace

namespace {

// One column of the table as an HDF5 dataset over the rows of one estimator.
void write_column(H5Writer& h5, const std::string& g, const ResultColumn& c,
                  const std::vector<const ResultRow*>& rows) {
  const std::string zero_note = "; 0 in rows whose status is not ok";
  const std::string path = g + "/" + (c.when == ColumnWhen::Mc ? "mc_" : "") + c.name;
  const H5Writer::Meaning meaning{
      c.type == ColumnType::Flag  // mc_trusted: its threshold in the description
          ? fmt::format("1 if the empirical variance can be trusted (>= {:g}% of entries within 3 SE), 0 if heavy "
                        "tails make it useless",
                        100 * McSummary::kMcTrustedShare)
          : std::string(c.help) + (c.type == ColumnType::Real && c.when != ColumnWhen::Always ? zero_note : ""),
      "row"};
  if (c.type == ColumnType::Real) {
    std::vector<double> v;
    for (const auto* r : rows) v.push_back(c.real(*r));
    h5.write(path, v, meaning);
  } else {
    std::vector<std::int64_t> v;
    for (const auto* r : rows) v.push_back(static_cast<std::int64_t>(c.count(*r)));
    h5.write(path, v, meaning);
  }
}

// The row keys that are not plain columns: status, reason, params and the per-set means.
void write_keys(H5Writer& h5, const std::string& g, const std::vector<const ResultRow*>& mine) {
  std::vector<std::int64_t> status;
  nlohmann::json reason = nlohmann::json::array(), params = nlohmann::json::array();
  std::size_t sets = 0;
  for (const auto* r : mine) {
    status.push_back(static_cast<std::int64_t>(r->status));
    reason.push_back(r->reason);
    params.push_back(r->params);
    sets = std::max(sets, r->mean_log_var_per_set.size());
  }
  h5.write(g + "/status", status,
           {"0 ok, 1 exact (zero variance at every pair), 2 undefined, 3 failed; see reason", "row"});
  h5.write_text(g + "/reason", reason.dump(), {"JSON list: why a row is not ok (empty for ok rows)", "row"});
  h5.write_text(g + "/params", params.dump(),
                {"JSON list: fitted parameters of each set pair, per row", "row,set_pair"});
  arma::mat per_set(mine.size(), sets, arma::fill::zeros);
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (std::size_t p = 0; p < mine[i]->mean_log_var_per_set.size(); ++p)
      per_set(i, p) = mine[i]->mean_log_var_per_set[p];
  h5.write(g + "/per_set_mean_log_var", per_set,
           {"mean over the pairs of one set pair of log Var; 0 in rows whose status "
            "is not ok",
            "row,set_pair"});
}

}  // namespace

void write_table(H5Writer& h5, const std::string& group, const std::vector<ResultRow>& rows,
                 const std::vector<std::string>& estimators) {
  for (const auto& name : estimators) {
    std::vector<const ResultRow*> mine;
    for (const auto& r : rows)
      if (r.estimator == name) mine.push_back(&r);
    const std::string g = group + "/" + name;
    h5.group(g);
    h5.attr(g, "rows", "one row per grid point (dim, points, features, sigma) of this estimator");
    if (!mine.empty()) h5.attr(g, "quantity", quantity_description(mine.front()->quantity));
    if (!mine.empty() && mine.front()->empirical_reps)
      h5.attr(g, "variance",
              fmt::format("empirical: no exact variance; sample variance of {} Monte Carlo repetitions on the first {} "
                          "points of each set",
                          mine.front()->empirical_reps, mine.front()->empirical_points));
    for (const auto& c : result_columns())
      if (*c.name && c.when != ColumnWhen::Mc) write_column(h5, g, c, mine);
    write_keys(h5, g, mine);
    if (std::none_of(mine.begin(), mine.end(), [](const auto* r) { return r->mc.has_value(); })) continue;
    for (const auto& c : result_columns())
      if (*c.name && c.when == ColumnWhen::Mc) write_column(h5, g, c, mine);
  }
}

void write_h5(H5Writer& h5, const std::string& group, const std::vector<VarianceResult>& results,
              const VarianceStudyOptions& opt) {
  std::vector<ResultRow> rows;
  for (const auto& r : results) rows.push_back(result_row(r, opt));
  write_table(h5, group, rows, opt.estimators);
}

}  // namespace kestrel
