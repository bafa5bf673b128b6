// advise's prediction of one (estimator, sampler) row: attention rows or normalisers (exact where a three-point form
// gives them, else simulate.cpp) or kernel entries (kernel_entries.cpp), then the finiteness check, the feature range
// at its M and the validation (validate.cpp).
#include "tasks/advise/steps.hpp"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "analysis/attention_variance.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"

namespace kestrel::advise_steps {

namespace {

// Below this share of the exact error at M = 1, a simulated normaliser curve is not trusted.
constexpr double kHeavyTailRatio = 0.5;

// Attention rows or normalisers: the normalisers' error is exact for iid features of a family with a three-point form
// (e(M) = e(1) / sqrt(M)); everything else is simulated.
void predict_rows(AdviceRow& row, const Estimator& e, const std::optional<ThreePointForm>& form, const Inputs& in,
                  const ExactAttention& exact, Sampler sampler, bool control_variate, const AdviseOptions& opt) {
  const arma::mat X = in.Qk.cols(in.rows);
  if (in.normaliser && sampler == Sampler::Iid && form && columns_unit(e) == 1 && opt.metric == AdviseMetric::Rmse) {
    const AttentionPrediction p = predict_attention_error(*form, true, opt.kernel, X, in.Kk, in.V, 1);
    row.method = "exact";
    row.err1_each = arma::exp(0.5 * p.log_rel_var);
    fill_iid_curve(row, row.err1_each, opt);
  } else {
    predict_simulated(row, e, in, exact, sampler, control_variate, opt);
  }
  if (in.normaliser && form && opt.metric == AdviseMetric::Rmse && sampler != Sampler::Iid) {
    // One orthogonal or simplex feature is one Gaussian draw (a Haar direction with a chi(d) norm), so at M = 1 the
    // exact iid error is the truth for every sampler. A simulation far below it has not seen the tails of D-hat, and
    // its M would be far too small (GUIDE: heavy tails).
    const AttentionPrediction p = predict_attention_error(*form, true, opt.kernel, X, in.Kk, in.V, 1);
    const double exact1 = quantile(arma::exp(0.5 * p.log_rel_var), 0.95);
    if (row.err1_p95 < kHeavyTailRatio * exact1)
      throw NumericalError(fmt::format(
          "simulation untrusted (heavy tails): at M = 1 its 95th-percentile normaliser error is {:.3g}, the exact "
          "one {:.3g}; the draws have not seen the tails of D-hat, so no M is named (scale the inputs down, or use "
          "iid features, whose error is exact)",
          row.err1_p95, exact1));
  }
  // Pairs: the sampled rows against the sampled keys.
  const arma::mat lv1 = e.log_var_over_k2(X, in.Kk.cols(in.keys));
  row.log_rel_var_median = quantile(arma::vectorise(lv1), 0.5);
  row.log_rel_var_p95 = quantile(arma::vectorise(lv1), 0.95);
}

// Every key the same (all-zero queries and keys, or a constant sequence): a row's estimates K-hat_ij are one positive
// number for every key j, so the estimated attention row equals the exact one (mean(V), of the prefix when causal) at
// every M for every sampler: error 0, M = 1. Not so for the normalisers alone (D-hat_i = Lk K-hat_i is still random).
bool exact_rows(const Inputs& in, const AdviseOptions& opt) {
  if (in.normaliser && opt.metric != AdviseMetric::Tv) return false;
  return arma::all(arma::vectorise(in.Kk.each_col() - in.Kk.col(0)) == 0.0);
}

}  // namespace

arma::uword columns_unit(const Estimator& e) { return std::max<arma::uword>(1, e.columns_per_draw()); }

arma::uword row_budget(const Estimator& e, const AdviseOptions& opt) {
  const arma::uword c = columns_unit(e);
  if (opt.budget < c)
    throw Undefined(fmt::format("a draw of it has {} feature columns, more than the budget M = {}", c, opt.budget));
  return opt.budget / c * c;
}

Draw draw_columns(const Estimator& e, arma::uword M, Rng& rng, Sampler sampler) {
  const arma::uword c = columns_unit(e);
  require(M % c == 0, "M = {} is not a whole number of draws of {} ({} feature columns each)", M, e.info().name, c);
  return e.draw(M / c, rng, sampler);
}

// One (estimator, sampler) row: the prediction, its finiteness, the feature range at its M and the validation.
void predict_row(AdviceRow& row, const Family& f, const Estimator& e, const std::optional<ThreePointForm>& form,
                 const Inputs& in, const ExactAttention& exact, const arma::vec& log_norm, Sampler sampler,
                 const AdviseOptions& opt, const std::function<void(const std::string&)>& say) {
  if (opt.quantity == AdviseQuantity::Attention) {
    if (!e.info().positive)
      throw Undefined(
          "its features can be negative, so the normaliser K-hat 1 can be 0 or negative "
          "(quantity kernel covers it)");
    if (sampler != Sampler::Iid && !e.info().projections)
      throw Undefined("its draws are not Gaussian projections, so " + row.sampler + " does not apply");
    say(fmt::format("predicting {} ({})", f.name, row.sampler));
    const auto t0 = std::chrono::steady_clock::now();
    // The control variate needs E D-hat = D: a hybrid pairing its draws (~M^2 features) has no such average, so not
    // there; hrf-cluster's D-hat is an average over its draws, so there.
    if (exact_rows(in, opt)) {
      row.method = "exact (every key is the same: the estimated attention rows are exact)";
      fill_iid_curve(row, arma::zeros(in.rows.n_elem), opt);
      const arma::mat lv1 = e.log_var_over_k2(in.Qk.cols(in.rows), in.Kk.cols(in.keys));
      row.log_rel_var_median = quantile(arma::vectorise(lv1), 0.5);
      row.log_rel_var_p95 = quantile(arma::vectorise(lv1), 0.95);
    } else {
      predict_rows(row, e, form, in, exact, sampler, e.columns_per_draw() > 0, opt);
    }
    say(fmt::format("predicted {} ({}) in {:.1f} s", f.name, row.sampler, seconds_since(t0)));
  } else {
    say(fmt::format("predicting {} ({})", f.name, row.sampler));
    predict_kernel(row, e, in, sampler, opt);
  }
  // log(Var/K^2) is -inf where the estimates are exact (PosRF on all-zero inputs): a result, not an overflow.
  for (double v : {row.err1_median, row.err1_p95, row.at_m_median, row.at_m_p95, row.err_budget_p95,
                   std::max(row.log_rel_var_median, 0.0), std::max(row.log_rel_var_p95, 0.0)})
    if (!std::isfinite(v) || !row.err1_each.is_finite())
      throw NumericalError(fmt::format(
          "the predicted error is not finite (inputs too large: the largest log normaliser is {:.4g}; scale "
          "them down)",
          log_norm.max()));
  // A hybrid pairing its draws has ~M^2 columns (263168 at M = 256 for hrf-angular): no draw of it at M here.
  const bool draws = e.columns_per_draw() > 0;
  if (!draws)
    row.note =
        "a hybrid: its features have ~M^2 columns for M draws (M counts draws here), so neither the feature "
        "range nor --validate is drawn";
  Rng rng(opt.seed, Stream::Features, 0);
  if (draws)
    row.range = feature_range(e, draw_columns(e, row.m_p95 ? row.m_p95 : row_budget(e, opt), rng, sampler), in,
                              log_norm, opt.kernel);
  const bool measurable = opt.quantity == AdviseQuantity::Kernel || opt.metric != AdviseMetric::Tv;
  if (opt.validate && row.m_p95 && draws && !measurable)
    row.note = "--validate measures output rows and normalisers, not the total variation: not validated";
  if (opt.validate && row.m_p95 && draws && measurable)  // where the target is not reached: no M to check
    validate_row(row, e, in, exact, sampler, opt, say);
}

}  // namespace kestrel::advise_steps
