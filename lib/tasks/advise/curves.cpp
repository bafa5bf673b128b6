// advise's curves: the error against M per (estimator, sampler) from exact rows (e(1) / sqrt(M)) or simulated ones
// (quantiles over rows with their SEs), the M read off them for the target and its +-2 SE interval, and the grid and
// draws of the simulated predictions.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <cmath>

namespace kestrel::advise_steps {

namespace {

// The smallest M at which the curve reaches the target: the first grid point at or below it, interpolated in log-log
// from the point before (0 if none within the grid).
arma::uword m_for_target(const std::vector<double>& m, const std::vector<double>& y, double target) {
  std::size_t k = 0;
  while (k < m.size() && !(y[k] <= target)) ++k;
  if (k == m.size()) return 0;
  if (k == 0) return static_cast<arma::uword>(m[0]);
  double M = m[k];
  if (y[k] > 0 && y[k - 1] > 0 && y[k - 1] != y[k])
    M = std::exp(std::log(m[k - 1]) +
                 std::log(target / y[k - 1]) / std::log(y[k] / y[k - 1]) * std::log(m[k] / m[k - 1]));
  return static_cast<arma::uword>(std::clamp(std::ceil(M * (1 - 1e-12)), m[k - 1] + 1, m[k]));
}

}  // namespace

// The q-quantile of v (linear interpolation between order statistics).
double quantile(arma::vec v, double q) {
  v = arma::sort(v);
  const double pos = q * static_cast<double>(v.n_elem - 1);
  const auto lo = static_cast<arma::uword>(std::floor(pos));
  const arma::uword hi = std::min<arma::uword>(lo + 1, v.n_elem - 1);
  if (v[hi] == v[lo]) return v[lo];  // also -inf (log-variances of exact estimates), where the difference is NaN
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// The SE at the q-quantile of v: the SE (of s) of the nearer of the two rows that bracket it, and their mean at the
// midpoint (a median of an even count), where the nearer row used to be picked by rounding.
double quantile_se(const arma::vec& v, const arma::vec& s, double q) {
  const arma::uvec order = arma::stable_sort_index(v);
  const double pos = q * static_cast<double>(v.n_elem - 1);
  const auto lo = static_cast<arma::uword>(std::floor(pos));
  const arma::uword hi = std::min<arma::uword>(lo + 1, v.n_elem - 1);
  const double t = pos - static_cast<double>(lo);
  if (t == 0.5) return 0.5 * (s[order[lo]] + s[order[hi]]);
  return s[order[t < 0.5 ? lo : hi]];
}

// What a metric averages over draws for each row: the squared error (then the error is its square root) or an
// absolute one.
bool squared(AdviseMetric m) { return m != AdviseMetric::MeanAbs && m != AdviseMetric::Tv; }

// Per row: the error and its standard error from the mean over draws of the metric's per-draw quantity and its SE.
std::pair<arma::vec, arma::vec> row_errors(const arma::vec& mean, const arma::vec& se, const arma::vec& norm,
                                           AdviseMetric m) {
  if (!squared(m)) return {mean / norm, se / norm};
  const arma::vec root = arma::sqrt(mean);
  arma::vec root_se = se / (2 * root);
  root_se.elem(arma::find(root == 0)).zeros();
  return {root / norm, root_se / norm};
}

std::vector<arma::uword> curve_grid(arma::uword budget) {
  std::vector<arma::uword> m;
  for (arma::uword v = 1; v < budget; v *= 2) m.push_back(v);
  m.push_back(budget);
  return m;
}

// Smallest M in [1, budget] with f(M) <= target for f decreasing in M (0 if f(budget) > target).
arma::uword smallest_m(const std::function<double(arma::uword)>& f, double target, arma::uword budget) {
  if (f(budget) > target) return 0;
  arma::uword lo = 0, hi = budget;  // f(hi) <= target; lo = 0 or f(lo) > target
  while (hi - lo > 1) {
    const arma::uword mid = lo + (hi - lo) / 2;
    (f(mid) <= target ? hi : lo) = mid;
  }
  return hi;
}

// log-log interpolation of a positive curve y(m) at M (linear where a value is 0); the end values outside the grid.
double curve_at(const std::vector<double>& m, const std::vector<double>& y, double M) {
  if (M <= m.front()) return y.front();
  std::size_t k = 1;
  while (k + 1 < m.size() && m[k] < M) ++k;
  if (M >= m.back()) return y.back();
  const double t = std::log(M / m[k - 1]) / std::log(m[k] / m[k - 1]);
  if (y[k - 1] <= 0 || y[k] <= 0) return y[k - 1] + t * (y[k] - y[k - 1]);
  return std::exp(std::log(y[k - 1]) + t * std::log(y[k] / y[k - 1]));
}

void fill_iid_curve(AdviceRow& row, const arma::vec& err1, const AdviseOptions& opt) {
  row.err1_median = quantile(err1, 0.5);
  row.err1_p95 = quantile(err1, 0.95);
  auto need = [&](double e1) -> arma::uword {
    const double m = std::ceil(e1 * e1 / (opt.target * opt.target) * (1 - 1e-12));
    return m <= static_cast<double>(opt.budget) ? std::max<arma::uword>(1, static_cast<arma::uword>(m)) : 0;
  };
  row.m_median = need(row.err1_median);
  row.m_p95 = need(row.err1_p95);
  const double sb = std::sqrt(static_cast<double>(opt.budget));
  row.err_budget_median = row.err1_median / sb;
  row.err_budget_p95 = row.err1_p95 / sb;
  const double sm = std::sqrt(static_cast<double>(row.m_p95 ? row.m_p95 : opt.budget));
  row.at_m_median = row.err1_median / sm;
  row.at_m_p95 = row.err1_p95 / sm;
  row.m_p95_low = row.m_p95_high = row.m_p95;
  row.decision = row.m_p95 ? "M" : "out of reach";
  for (arma::uword m : curve_grid(opt.budget)) {
    row.curve_m.push_back(static_cast<double>(m));
    row.curve_median.push_back(row.err1_median / std::sqrt(static_cast<double>(m)));
    row.curve_p95.push_back(row.err1_p95 / std::sqrt(static_cast<double>(m)));
  }
  row.curve_median_se = row.curve_p95_se = row.curve_draws = std::vector<double>(row.curve_m.size(), 0.0);
}

// M in whole draws of `unit` columns, and in whole blocks of `block` columns above one block (0: no blocks).
arma::uword whole_blocks(arma::uword M, arma::uword block, arma::uword unit) {
  M = (M + unit - 1) / unit * unit;
  return block && M > block ? (M + block - 1) / block * block : M;
}

// A simulated prediction: per row and grid M the error and its SE (rows x grid); the curve of the median and 95th
// percentile over rows (each with the SE at that quantile, quantile_se), M for the target (in whole blocks)
// and its interval, and the decision (AdviceRow::decision).
void fill_simulated_curve(AdviceRow& row, const arma::mat& err, const arma::mat& se,
                          const std::vector<arma::uword>& grid, const std::vector<std::size_t>& draws,
                          arma::uword block, const AdviseOptions& opt, arma::uword unit) {
  for (std::size_t k = 0; k < grid.size(); ++k) {
    const arma::vec e = err.col(k), s = se.col(k);
    const double med = quantile(e, 0.5), p95 = quantile(e, 0.95);
    row.curve_m.push_back(static_cast<double>(grid[k]));
    row.curve_median.push_back(med);
    row.curve_p95.push_back(p95);
    row.curve_median_se.push_back(quantile_se(e, s, 0.5));
    row.curve_p95_se.push_back(quantile_se(e, s, 0.95));
    row.curve_draws.push_back(static_cast<double>(draws[k]));
  }
  row.err1_each = err.col(0);
  decide_on_curve(row, block, grid.back() == opt.budget, opt, unit);
}

void decide_on_curve(AdviceRow& row, arma::uword block, bool at_budget, const AdviseOptions& opt, arma::uword unit) {
  row.err1_median = row.curve_median.front();
  row.err1_p95 = row.curve_p95.front();
  row.err_budget_median = row.curve_median.back();
  row.err_budget_p95 = row.curve_p95.back();
  row.m_median = whole_blocks(m_for_target(row.curve_m, row.curve_median, opt.target), block, unit);
  const arma::uword m = whole_blocks(m_for_target(row.curve_m, row.curve_p95, opt.target), block, unit);
  std::vector<double> lo(row.curve_p95), hi(row.curve_p95);
  for (std::size_t k = 0; k < lo.size(); ++k) {
    lo[k] = std::max(0.0, lo[k] - 2 * row.curve_p95_se[k]);
    hi[k] += 2 * row.curve_p95_se[k];
  }
  row.m_p95_low = whole_blocks(m_for_target(row.curve_m, lo, opt.target), block, unit);
  row.m_p95_high = whole_blocks(m_for_target(row.curve_m, hi, opt.target), block, unit);
  if (at_budget && row.curve_p95.back() - 2 * row.curve_p95_se.back() > opt.target)
    row.decision = "out of reach";
  else if (m && row.m_p95_low && row.m_p95_high &&
           (static_cast<double>(row.m_p95_high) <= kSettledWidth * static_cast<double>(row.m_p95_low) ||
            (block && row.m_p95_low >= block && row.m_p95_high - row.m_p95_low <= block)))  // adjacent whole blocks
    row.decision = "M";
  else
    row.decision = "not settled";
  row.m_p95 = row.decision == "M" ? m : 0;
  const double M = static_cast<double>(row.m_p95 ? row.m_p95 : opt.budget);
  row.at_m_median = curve_at(row.curve_m, row.curve_median, M);
  row.at_m_p95 = curve_at(row.curve_m, row.curve_p95, M);
  row.at_m_p95_se = curve_at(row.curve_m, row.curve_p95_se, M);
}

}  // namespace kestrel::advise_steps

namespace kestrel {

std::vector<arma::uword> prediction_grid(arma::uword budget) {
  std::vector<arma::uword> g;
  for (int k = 0;; ++k) {
    const auto m = static_cast<arma::uword>(std::llround(std::exp2(k / 4.0)));
    if (m >= budget) break;
    if (g.empty() || m > g.back()) g.push_back(m);
  }
  g.push_back(budget);
  return g;
}

std::vector<std::size_t> prediction_draws(const std::vector<arma::uword>& grid, std::size_t draws) {
  const std::size_t floor = std::max<std::size_t>(2, (draws + 3) / 4);
  std::vector<std::size_t> r;
  for (arma::uword m : grid) {
    const double scaled = static_cast<double>(draws) * std::sqrt(128.0 / static_cast<double>(m));
    r.push_back(std::clamp(static_cast<std::size_t>(std::ceil(scaled)), floor, std::max(floor, draws)));
  }
  return r;
}

}  // namespace kestrel
