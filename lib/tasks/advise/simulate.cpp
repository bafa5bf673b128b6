// advise's predictions: per (estimator, sampler), attention rows or normalisers simulated with nested draws (or exact
// where a three-point form allows) and the stop rule of a simulated curve; kernel entries are kernel_entries.cpp's and
// --validate's independent measurement is validate.cpp's.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "analysis/attention_variance.hpp"
#include "analysis/control_variate.hpp"
#include "analysis/coupled_variance.hpp"
#include "analysis/montecarlo.hpp"
#include "analysis/nested_attention.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"

namespace kestrel::advise_steps {

namespace {

// How far past the M where the 95th percentile + 2 SE reaches the target the first pass of a simulated curve goes
// (unless --full-curve): one doubling, so the plot shows the curve's slope beyond the answer.
constexpr double kCurveBeyond = 2;

// Beyond M = kDrawsKeptUpTo the draws of the first pass that continue are cut to what keeps the relative SE of the
// rows' mean squared errors at about kDrawSeGoal (NestedOptions::se_goal), never below --draws / 16: rows of many
// value columns have concentrated errors, and at long context the larger M are most of the cost. The decision then
// adds draws where it needs them (settle).
constexpr double kDrawSeGoal = 0.05;
constexpr arma::uword kDrawsKeptUpTo = 128;

// A first pass whose p95 - 2 SE at some M >= kHeadingFrom, projected to the budget along the curve's own slope over its
// last doubling (log p95 against log M, between -1/2, the iid rate, and 0), is still kHeadingOut times the target goes
// on with the fewest draws (--draws / 16, as the SE rule's floor): the curve is drawn, and the decision at the budget
// adds the draws it needs (settle). At L = 32768 this is most of the time (bench/results/advise.md). The slope only
// chooses draws, never a decision: attention rows of trained and untrained models fall far slower than 1/sqrt(M) at
// a few hundred features (a decoder head's PosRF p95: 0.22 at M = 16, 0.15 at 256), and projected at 1/sqrt(M) such a
// row took every draw to the budget before its decision there took more.
constexpr double kHeadingOut = 1.2;
constexpr arma::uword kHeadingFrom = 32;

// A row stops before its allowance is spent only when the draws projected to settle it exceed what it can afford by
// this factor: projected from a few draws of a heavy-tailed row, they are rough (on a 128 x 32 anisotropic input, 2628
// projected from 32 draws; 12288 settled it).
constexpr double kProjectionSlack = 4;

// The draws of one settling run held at once: at most about this many bytes of draw state.
constexpr double kSettleBytes = 1e9;

// One grid point of a simulated curve: the draws' sums of the metric's per-row quantity (s1, s2) and, for the squared
// metrics, the sums behind the control variate. Runs of fresh draws add to it.
struct GridColumn {
  double n = 0;
  arma::vec s1, s2;
  ControlVariateSums cv;
  GridColumn& operator+=(const GridColumn& o) {
    if (n == 0) return *this = o;
    n += o.n, s1 += o.s1, s2 += o.s2, cv += o.cv;
    return *this;
  }
};

// Grid column k of a nested simulation: the sums rebuilt exactly from the mean and SE (NestedErrors, n draws).
GridColumn column_of(const NestedErrors& ne, std::size_t k, AdviseMetric metric) {
  const bool tv = metric == AdviseMetric::Tv;
  const arma::mat& mean = tv ? ne.tv : squared(metric) ? ne.sq : ne.abs;
  const arma::mat& se = tv ? ne.tv_se : squared(metric) ? ne.sq_se : ne.abs_se;
  GridColumn c;
  c.n = static_cast<double>(ne.draws[k]);
  c.s1 = c.n * mean.col(k);
  c.s2 = c.n * (arma::square(se.col(k)) * (c.n - 1) + arma::square(mean.col(k)));
  c.cv = ne.sq_sums[k];
  return c;
}

// The metric's per-row errors and SEs at one column (with the control variate for the squared metrics), and the
// per-row variance reduction it gave (1 for the others).
struct ColumnErrors {
  arma::vec err, se, reduction;
};
ColumnErrors errors_of(const GridColumn& c, const Inputs& in, AdviseMetric metric, bool control_variate) {
  ColumnErrors out;
  if (squared(metric) && control_variate) {
    const ControlVariateSums::Estimate e = c.cv.estimate();
    std::tie(out.err, out.se) = row_errors(e.mean, e.se, in.norm, metric);
    out.reduction = e.reduction;
  } else {
    const arma::vec mean = c.s1 / c.n;
    const arma::vec se = arma::sqrt(arma::clamp(c.s2 / c.n - arma::square(mean), 0, kInf) / (c.n - 1));
    std::tie(out.err, out.se) = row_errors(mean, se, in.norm, metric);
    out.reduction.ones(mean.n_elem);
  }
  return out;
}

// The grid of a simulated curve in feature columns, c per draw: prediction_grid over the draws, for orthogonal and
// simplex features whole blocks of d draws above d (a partial block can have a larger error than the whole block below
// it, so the curve shows the block structure), times c.
std::vector<arma::uword> simulation_grid(arma::uword budget, Sampler sampler, arma::uword d, arma::uword c) {
  const arma::uword draws = budget / c;
  std::vector<arma::uword> out;
  for (arma::uword m : prediction_grid(draws)) {
    const arma::uword w = sampler == Sampler::Iid || m <= d ? m : std::min(draws, (m + d - 1) / d * d);
    if (out.empty() || c * w > out.back()) out.push_back(c * w);
  }
  return out;
}

// The draws at each grid point of feature columns (what simulate_nested takes).
std::vector<arma::uword> draws_at(const std::vector<arma::uword>& grid, const Estimator& e) {
  std::vector<arma::uword> out(grid);
  for (auto& m : out) m /= columns_unit(e);
  return out;
}

// The sampled rows (indices into Inputs::rows) at positions >= --from-position (empty when it is not given).
arma::uvec from_rows(const Inputs& in, const AdviseOptions& opt) {
  if (in.positions.is_empty() || opt.from_position == 0) return {};
  const arma::uvec f = arma::find(in.positions >= opt.from_position);
  require(f.n_elem >= 2,
          "--from-position {}: only {} sampled rows are at or beyond it; give a smaller position or more "
          "--rows",
          opt.from_position, f.n_elem);
  return f;
}

// Runs `draws` fresh draws (indices from `first`) on grid points [k0, k1] and adds them to cols (extended as needed),
// in runs small enough to hold in memory.
void add_draws(std::vector<GridColumn>& cols, const Estimator& e, const Inputs& in, const ExactAttention& exact,
               const std::vector<arma::uword>& grid, std::size_t k0, std::size_t k1, std::size_t draws,
               std::uint64_t first, Sampler sampler, const AdviseOptions& opt) {
  const std::vector<arma::uword> sub =
      draws_at({grid.begin() + static_cast<std::ptrdiff_t>(k0), grid.begin() + static_cast<std::ptrdiff_t>(k1) + 1}, e);
  const double per_draw = 8.0 * (static_cast<double>(sub.back()) * static_cast<double>(in.Qk.n_rows) +
                                 static_cast<double>(in.rows.n_elem) * static_cast<double>(in.V.n_cols + 1));
  const auto chunk = static_cast<std::size_t>(std::max(2.0, std::floor(kSettleBytes / per_draw)));
  if (cols.size() <= k1) cols.resize(k1 + 1);
  for (std::size_t r0 = 0; r0 < draws; r0 += chunk) {
    const std::size_t n = std::max<std::size_t>(2, std::min(chunk, draws - r0));
    const NestedOptions nested{.grid = sub,
                               .draws = std::vector<std::size_t>(sub.size(), n),
                               .seed = opt.seed,
                               .sampler = sampler,
                               .total_variation = opt.metric == AdviseMetric::Tv,
                               .first_draw = first + r0,
                               .positions = in.positions};
    const NestedErrors ne = simulate_nested(e, in.Qk.cols(in.rows), in.Kk, in.normaliser ? arma::mat() : in.V,
                                            in.normaliser ? arma::mat() : exact.Y, exact.log_normaliser, nested);
    for (std::size_t k = 0; k < sub.size(); ++k) cols[k0 + k] += column_of(ne, k, opt.metric);
  }
}

}  // namespace

// A simulated row's state between its settle rounds: the grid columns' sums, the work spent, the next draw's index and
// the last round's p95 at the budget (heading_p95); and what the first pass was, for the row's method.
struct SimulatedRun {
  std::vector<GridColumn> cols;
  double work = 0;
  std::uint64_t next = 0;
  struct AtBudget {
    double n, p;
  };
  std::optional<AtBudget> before;
  std::size_t first_draws = 0, first_last = 0;  // the first pass's draws at its first and last grid points
  arma::uword kept_m = 0;                       // the last grid point all the first pass's draws reached
};

namespace {

// The work (kWorkPerSecond) of one feature drawn on every sampled row and key, of a draw's step to the next grid point
// (kRowStepWork), and of a first pass: a draw reaching grid point k has drawn grid[k] features in k + 1 steps.
double work_per_feature(const Inputs& in) {
  return (static_cast<double>(in.rows.n_elem) + static_cast<double>(in.Kk.n_cols) / 4) *
         (static_cast<double>(in.Qk.n_rows + in.V.n_cols) + kExpWork);
}
double work_per_step(const Inputs& in) {
  return static_cast<double>(in.rows.n_elem) * static_cast<double>(in.V.n_cols + 1) *
         (in.positions.is_empty() ? kRowStepWork : kCausalRowStepWork);
}
// The work of one more draw of the settling rounds at grid points [k0, k1]: grid[k1] features in k1 - k0 + 1 steps.
double draw_work(const Inputs& in, const std::vector<arma::uword>& grid, std::size_t k0, std::size_t k1) {
  return static_cast<double>(grid[k1]) * work_per_feature(in) + static_cast<double>(k1 - k0 + 1) * work_per_step(in);
}
double first_pass_work(const NestedErrors& ne, const std::vector<arma::uword>& grid, const Inputs& in) {
  double work = 0;
  for (std::size_t k = 0; k < ne.sq.n_cols; ++k)
    work += static_cast<double>(ne.draws[k]) *
            (static_cast<double>(grid[k] - (k ? grid[k - 1] : 0)) * work_per_feature(in) + work_per_step(in));
  return work;
}

// The settle rule's next round at the grid points around the decision: how many fresh draws to add there (doubling
// them within the row's work allowance and --max-draws; grid points the first pass never reached, have = 0, start
// with its last count), or 0 to stop: settled, capped by --max-draws, out of the allowance, or the draws projected to
// settle it beyond kProjectionSlack times what it can afford. A row that stops not settled gets draws_to_settle and
// settle_seconds. work: spent so far; unit: the work of one draw there.
std::size_t settle_round(AdviceRow& row, bool settled, std::size_t have, std::size_t need, double work, double unit,
                         std::size_t first_last, const Inputs& in, const AdviseOptions& opt) {
  const double affordable = std::max(0.0, std::floor((in.work_allowance - work) / unit));
  const bool capped = opt.max_draws && (have >= opt.max_draws || need > opt.max_draws);
  const bool hopeless = static_cast<double>(need) > static_cast<double>(have) + kProjectionSlack * affordable;
  if (settled || capped || hopeless || affordable < 2) {
    if (row.decision == "not settled") {
      // At least a doubling round: a projection at or below the draws it has is wrong (the row is open).
      row.draws_to_settle = std::max(need, std::max<std::size_t>(2 * have, 2));
      row.settle_seconds = (work + static_cast<double>(row.draws_to_settle - have) * unit) / kWorkPerSecond;
    }
    return 0;
  }
  std::size_t more = std::min<std::size_t>(have ? have : first_last, static_cast<std::size_t>(affordable));
  if (opt.max_draws) more = std::min(more, opt.max_draws - have);
  return std::max<std::size_t>(more, 2);
}

}  // namespace

double heading_p95(double n_before, double p_before, double n, double p) {
  return n_before >= 16 && n >= 1.5 * n_before ? p + (p - p_before) / (n / n_before - 1) : p;
}

namespace {

// The first pass of a simulated curve: the grid up to kCurveBeyond times the first M whose p95 + 2 SE is at or below
// the target (to the budget where none is, or with --full-curve), with fewer draws beyond kDrawsKeptUpTo and where the
// curve heads out of reach.
std::shared_ptr<SimulatedRun> first_pass(const Estimator& e, const Inputs& in, const ExactAttention& exact,
                                         const std::vector<arma::uword>& grid, const arma::uvec& from, Sampler sampler,
                                         bool control_variate, const AdviseOptions& opt) {
  std::optional<arma::uword> reached;  // the first grid M whose p95 + 2 SE <= target (over all rows and from rows)
  const std::size_t min_draws = std::max<std::size_t>(2, opt.draws / 16);
  auto draws_on = [&](const NestedErrors& ne) {
    const std::size_t k = ne.sq.n_cols - 1;
    const ColumnErrors c = errors_of(column_of(ne, k, opt.metric), in, opt.metric, control_variate);
    auto ends = [&](const arma::vec& err, const arma::vec& se) {  // p95 -+ 2 SE
      const double p95 = quantile(err, 0.95), s = quantile_se(err, se, 0.95);
      return std::pair{p95 - 2 * s, p95 + 2 * s};
    };
    auto [low, up] = ends(c.err, c.se);
    if (!from.is_empty()) {
      const auto [flow, fup] = ends(arma::vec(c.err(from)), arma::vec(c.se(from)));
      low = std::min(low, flow), up = std::max(up, fup);
    }
    if (!reached && up <= opt.target) reached = grid[k];
    if (opt.full_curve) return kKeepDraws;
    if (reached) return static_cast<double>(grid[k]) >= kCurveBeyond * static_cast<double>(*reached) ? 0 : kKeepDraws;
    // Heading out of reach: falling as over its last doubling, p95 - 2 SE would stay kHeadingOut times the target at
    // the budget. The draws go on at the floor; the decision at the budget then adds what it needs (settle).
    if (grid[k] < kHeadingFrom) return kKeepDraws;
    std::size_t h = k;  // the grid point at half this M (or below)
    while (h > 0 && 2 * grid[h] > grid[k]) --h;
    const double p = quantile(errors_of(column_of(ne, h, opt.metric), in, opt.metric, control_variate).err, 0.95);
    const double q = quantile(c.err, 0.95);
    const double ratio = static_cast<double>(grid[k]) / static_cast<double>(grid[h]);
    const double slope = p > 0 && q > 0 ? std::clamp(std::log(q / p) / std::log(ratio), -0.5, 0.0) : -0.5;
    const double at_budget = low * std::pow(static_cast<double>(opt.budget) / static_cast<double>(grid[k]), slope);
    return at_budget > kHeadingOut * opt.target ? min_draws : kKeepDraws;
  };
  const NestedOptions first{.grid = draws_at(grid, e),
                            .draws = prediction_draws(grid, opt.draws),
                            .seed = opt.seed,
                            .sampler = sampler,
                            .total_variation = opt.metric == AdviseMetric::Tv,
                            .se_goal = kDrawSeGoal,
                            .adapt_from = kDrawsKeptUpTo,
                            .min_draws = min_draws,
                            .positions = in.positions};
  const NestedErrors ne = simulate_nested(e, in.Qk.cols(in.rows), in.Kk, in.normaliser ? arma::mat() : in.V,
                                          in.normaliser ? arma::mat() : exact.Y, exact.log_normaliser, first, draws_on);
  auto run = std::make_shared<SimulatedRun>();
  for (std::size_t k = 0; k < ne.sq.n_cols; ++k) run->cols.push_back(column_of(ne, k, opt.metric));
  run->work = first_pass_work(ne, grid, in);
  run->next = first.draws.front();
  run->first_draws = ne.draws.front();
  run->first_last = first.draws.back();
  std::size_t kept = 0;  // the last grid point the first pass's draws all reached (before any cut)
  while (kept + 1 < ne.draws.size() && ne.draws[kept + 1] == ne.draws.front()) ++kept;
  run->kept_m = grid[kept];
  return run;
}

}  // namespace

namespace {

// The draws that would settle an open row, projected with SEs shrinking as 1/sqrt(draws): the interval's width in log M
// (its ends lo, hi) to kSettledWidth, or (where the p95 at the budget is above the target) that p95's 2 SE to the
// distance from the target of the value it is heading for (heading_p95). settle_round decides from it whether to go on.
std::size_t draws_to_settle(const AdviceRow& row, std::pair<double, double> ends, std::size_t have, double n_now,
                            bool at_budget, const std::optional<SimulatedRun::AtBudget>& before,
                            const AdviseOptions& opt) {
  const double p = row.curve_p95.back(), s = row.curve_p95_se.back();
  const double w = std::log(ends.second / std::max(1.0, ends.first)), goal = std::log(kSettledWidth);
  double n = static_cast<double>(have) * std::pow(w / goal, 2);
  const double heading = before ? heading_p95(before->n, before->p, n_now, p) : p;
  if (at_budget && p > opt.target && heading > opt.target)
    n = std::min(n, n_now * std::pow(2 * s / (heading - opt.target), 2));
  return static_cast<std::size_t>(std::ceil(std::min(n, 1e15)));
}

// Causal: the rows' error against position at grid point M (the decision's), and its bands.
void fill_positions(AdviceRow& row, const arma::vec& err, arma::uword M, const Inputs& in) {
  row.err_at_m_each = err;
  row.positions = in.positions;
  row.position_m = M;
  row.bands.clear();
  for (const auto& [b0, b1] : position_bands(in.Kk.n_cols)) {
    const arma::uvec r = arma::find(in.positions >= b0 && in.positions < b1);
    if (r.is_empty()) continue;
    const arma::vec e = err(r);
    row.bands.push_back({b0, b1, r.n_elem, quantile(e, 0.5), quantile(e, 0.95)});
  }
}

}  // namespace

// Attention rows (or normalisers) of any sampler, simulated on the sampled rows with nested draws, then settled.
// First pass (first_pass; resumed instead where Inputs::run holds the row's draws), then, until the decision is settled
// (AdviceRow::decision), fresh draws are added at the grid points around it: from the interval's ends / 1.25 to x 1.25
// (the budget where the upper end is beyond it), doubling the draws there each round up to --max-draws. Where asked,
// the control variate c = D-hat_i / D_i - 1 (mean exactly 0) reduces the variance of the squared errors
// (analysis/control_variate.hpp).
void predict_simulated(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact,
                       Sampler sampler, bool control_variate, const AdviseOptions& options) {
  const arma::uword c = columns_unit(e), block = sampler == Sampler::Iid ? 0 : c * e.dim();
  AdviseOptions opt = options;  // M counts feature columns: the budget in whole draws
  opt.budget = row_budget(e, options);
  const std::vector<arma::uword> grid = simulation_grid(opt.budget, sampler, e.dim(), c);
  const arma::uvec from = from_rows(in, opt);
  const std::shared_ptr<SimulatedRun> run =
      in.run && *in.run ? *in.run : first_pass(e, in, exact, grid, from, sampler, control_variate, opt);
  if (in.run) *in.run = run;
  std::vector<GridColumn>& cols = run->cols;
  double& work = run->work;
  std::uint64_t& next = run->next;
  std::optional<SimulatedRun::AtBudget>& before = run->before;  // the last round's draws and p95 at the budget
  for (;;) {
    const std::vector<arma::uword> g(grid.begin(), grid.begin() + static_cast<std::ptrdiff_t>(cols.size()));
    arma::mat err(in.rows.n_elem, cols.size()), se(in.rows.n_elem, cols.size()), red(in.rows.n_elem, cols.size());
    std::vector<std::size_t> draws;
    for (std::size_t k = 0; k < cols.size(); ++k) {
      const ColumnErrors c = errors_of(cols[k], in, opt.metric, control_variate);
      err.col(k) = c.err, se.col(k) = c.se, red.col(k) = c.reduction;
      draws.push_back(static_cast<std::size_t>(cols[k].n));
    }
    row.curve_m.clear(), row.curve_median.clear(), row.curve_p95.clear();
    row.curve_median_se.clear(), row.curve_p95_se.clear(), row.curve_draws.clear();
    fill_simulated_curve(row, err, se, g, draws, block, opt, c);
    // The grid points around the decision (and the from rows' decision): the interval's ends / 1.25 .. x 1.25.
    auto ends = [&](const AdviceRow& r) {
      return std::pair{static_cast<double>(r.m_p95_low    ? r.m_p95_low
                                           : r.m_p95_high ? r.m_p95_high
                                                          : grid.back()),
                       r.m_p95_high ? static_cast<double>(r.m_p95_high) : static_cast<double>(grid.back())};
    };
    double lo, hi;
    std::tie(lo, hi) = ends(row);
    bool settled = row.decision != "not settled";
    if (!from.is_empty()) {
      AdviceRow f;
      fill_simulated_curve(f, arma::mat(err.rows(from)), arma::mat(se.rows(from)), g, draws, block, opt, c);
      row.from = {f.decision, f.m_p95,       f.m_p95_low, f.m_p95_high,
                  f.at_m_p95, f.at_m_p95_se, f.curve_p95, f.curve_p95_se};
      const auto [flo, fhi] = ends(f);
      lo = std::min(lo, flo), hi = std::max(hi, fhi);
      settled = settled && f.decision != "not settled";
    }
    std::size_t k0 = 0, k1 = grid.size() - 1;
    while (k0 + 1 < grid.size() && static_cast<double>(grid[k0 + 1]) <= lo / 1.25) ++k0;
    while (k1 > k0 && static_cast<double>(grid[k1 - 1]) >= hi * 1.25) --k1;
    std::size_t have = SIZE_MAX;
    for (std::size_t k = k0; k <= k1; ++k) have = std::min(have, k < cols.size() ? draws[k] : 0);
    row.settle_draws = have;
    // The variance reduction at the grid point of the decision (the named M, else the last point), over the rows at or
    // above the 90th percentile: those that set the 95th.
    std::size_t at = cols.size() - 1;
    while (row.m_p95 && at > 0 && static_cast<double>(grid[at - 1]) >= static_cast<double>(row.m_p95)) --at;
    const arma::vec top = red.col(at).eval()(arma::find(err.col(at) >= quantile(err.col(at), 0.9)));
    row.variance_reduction = arma::median(top);
    if (!in.positions.is_empty()) fill_positions(row, err.col(at), grid[at], in);
    const bool at_budget = g.back() == opt.budget;
    const double n_now = static_cast<double>(draws.back());
    const std::size_t need = settled ? 0 : draws_to_settle(row, ends(row), have, n_now, at_budget, before, opt);
    if (at_budget) before = {n_now, row.curve_p95.back()};
    const double unit = draw_work(in, grid, k0, k1);
    const std::size_t more = settle_round(row, settled, have, need, work, unit, run->first_last, in, opt);
    if (!more) break;
    add_draws(cols, e, in, exact, grid, k0, k1, more, next, sampler, opt);
    next += more;
    work += static_cast<double>(more) * unit;
  }
  row.work_seconds = work / kWorkPerSecond;
  row.method = fmt::format("simulated ({} nested draws up to M = {}, {} around the answer; seed {}{})",
                           run->first_draws, run->kept_m, row.settle_draws, opt.seed,
                           c > 1 ? fmt::format("; M counts feature columns, {} per draw", c) : "");
}

}  // namespace kestrel::advise_steps
