// advise's learned rows (learned.hpp): a learned curve read as an advice row with the random rows' decision rules.
#include "tasks/advise/learned.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "tasks/advise/steps.hpp"

namespace kestrel {

namespace {

// The parameters of fit seed 0 at M, named with their shapes.
std::vector<AdviceRow::Parameter> parameters_at(const LearnedCurvePoint& p) {
  std::vector<AdviceRow::Parameter> out;
  for (const NamedArray& a : named_parameters(p.fits.front().fit.params)) out.push_back({a.name, a.shape, a.values});
  return out;
}

// The SE of the held-out p95 at one M: over the fit seeds (each its own split and start) where there are two or more,
// else the order-statistic SE of the one fit's held-out rows.
double held_out_se(const LearnedCurvePoint& p) {
  return p.fits.size() > 1 ? p.held_out_se : p.fits.front().held_out.quantile_se;
}

}  // namespace

AdviceRow learned_row(const std::vector<LearnedCurvePoint>& curve, const AdviseOptions& opt) {
  require(!curve.empty() && !curve.front().fits.empty(), "a learned row needs a curve of at least one fitted M");
  AdviceRow row;
  row.estimator = "hedgehog";
  row.sampler = "learned";
  for (const LearnedCurvePoint& p : curve) {
    double median = 0;
    for (const auto& f : p.fits) median += row_quantile(f.held_out.errors, 0.5) / static_cast<double>(p.fits.size());
    row.curve_m.push_back(static_cast<double>(p.M));
    row.curve_median.push_back(median);
    row.curve_p95.push_back(p.held_out_mean);
    row.curve_median_se.push_back(0);  // (not estimated: the decision reads the 95th percentile)
    row.curve_p95_se.push_back(held_out_se(p));
    row.curve_draws.push_back(static_cast<double>(p.fits.size()));  // fits behind each point
    row.curve_train_p95.push_back(p.train_mean);
    row.curve_fit_seconds.push_back(p.fit_seconds);
  }
  AdviseOptions o = opt;
  o.budget = curve.back().M;  // the learned rows' budget: the grid's largest M
  advise_steps::decide_on_curve(row, 0, true, o);
  // A learned map exists at the grid's M only, so the random rows' rule (an interval at most 1.5x wide) is read on the
  // grid: settled where the curve -+ 2 SE cross the target before the same fitted M, which is the M named (its error
  // that map's; the interval stays the curve's).
  const auto fitted_at_or_above = [&](arma::uword m) -> arma::uword {
    for (const LearnedCurvePoint& p : curve)
      if (m && p.M >= m) return p.M;
    return 0;
  };
  if (row.decision != "out of reach") {
    const arma::uword lo = fitted_at_or_above(row.m_p95_low), hi = fitted_at_or_above(row.m_p95_high);
    row.decision = lo && lo == hi ? "M" : "not settled";
    row.m_p95 = row.decision == "M" ? lo : 0;
  }
  const auto& at = row.m_p95 ? *std::find_if(curve.begin(), curve.end(),
                                             [&](const LearnedCurvePoint& p) { return p.M >= row.m_p95; })
                             : curve.back();
  if (row.m_p95) {
    row.m_p95 = at.M;
    row.at_m_p95 = at.held_out_mean;
    row.at_m_p95_se = held_out_se(at);
  }
  row.parameters = parameters_at(at);
  row.parameters_m = at.M;
  const LearnedFitResult& first = at.fits.front();
  row.held_out_sequences.assign(first.held_out_sequences.begin(), first.held_out_sequences.end());
  row.parameters_held_out_p95 = first.held_out.quantile;
  const auto& f = curve.front().fits.front().fit;
  row.method = fmt::format(
      "fitted (Hedgehog map: attention cross-entropy, L-BFGS, {} iterations at M = {}; held-out p95 over {} fits, "
      "each its own split and start; seed {})",
      f.iterations, curve.front().M, curve.front().fits.size(), opt.seed);
  row.note = fmt::format(
      "the map's error on the tokens it was fitted on is {} at M = {} (held out: {}); its "
      "parameters are the report's, at M = {}",
      advise_steps::pct(at.train_mean), at.M, advise_steps::pct(at.held_out_mean), at.M);
  return row;
}

}  // namespace kestrel
