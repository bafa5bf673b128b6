// `kestrel advise` (see advise.hpp): fit every family on the user's points, predict the error over a sample of rows
// (simulated with nested draws, or exact), read off M, measure the features' exponents and the cost, and say what to
// use.
#include "tasks/advise.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "analysis/attention_variance.hpp"
#include "analysis/coupled_variance.hpp"
#include "analysis/montecarlo.hpp"
#include "analysis/nested_attention.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/vecmath.hpp"
#include "estimators/registry.hpp"
#include "tasks/attention.hpp"

namespace kestrel {

namespace {

constexpr double kMaxFeatureBytes = 4e9;

// The q-quantile of v (linear interpolation between order statistics).
double quantile(arma::vec v, double q) {
  v = arma::sort(v);
  const double pos = q * static_cast<double>(v.n_elem - 1);
  const auto lo = static_cast<arma::uword>(std::floor(pos));
  const arma::uword hi = std::min<arma::uword>(lo + 1, v.n_elem - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// A seeded sample of n of 0..L-1 without replacement, ascending (all when n >= L).
arma::uvec sample_indices(arma::uword L, arma::uword n, std::uint64_t seed, std::uint64_t stream_index) {
  if (n >= L) return arma::regspace<arma::uvec>(0, L - 1);
  Rng rng(seed, Stream::User, stream_index);
  std::vector<arma::uword> idx(L);
  for (arma::uword i = 0; i < L; ++i) idx[i] = i;
  for (arma::uword i = 0; i < n; ++i)
    std::swap(idx[i],
              idx[i + std::min<arma::uword>(L - i - 1, static_cast<arma::uword>(rng.uniform() * double(L - i)))]);
  idx.resize(n);
  std::sort(idx.begin(), idx.end());
  return arma::uvec(idx);
}

// Smallest M in [1, budget] with f(M) <= target for f decreasing in M (0 if f(budget) > target).
template <typename F>
arma::uword smallest_m(F&& f, double target, arma::uword budget) {
  if (f(budget) > target) return 0;
  arma::uword lo = 0, hi = budget;  // f(hi) <= target; lo = 0 or f(lo) > target
  while (hi - lo > 1) {
    const arma::uword mid = lo + (hi - lo) / 2;
    (f(mid) <= target ? hi : lo) = mid;
  }
  return hi;
}

std::vector<arma::uword> curve_grid(arma::uword budget) {
  std::vector<arma::uword> m;
  for (arma::uword v = 1; v < budget; v *= 2) m.push_back(v);
  m.push_back(budget);
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The inputs as the estimators see them: kernel points (scaled by d^(-1/4) when asked) and, for the attention
// routines that scale themselves, points whose attention_scaled() are those kernel points.
struct Inputs {
  arma::mat Qk, Kk;  // kernel points
  arma::mat Qa, Ka;  // attention inputs: attention_scaled(Qa) == Qk
  arma::mat V;       // Lk x dv, or Lk x 1 of ones for the normaliser
  arma::uvec rows;   // sampled query rows
  arma::uvec keys;   // sampled keys (kernel quantity)
  bool normaliser = false;
  arma::vec norm;  // per sampled row: what the metric divides by (one value repeated for the pooled ones)
};

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

// ----- numerical range -----

// log sum_i e^{v_i} (-inf for an empty or all -inf v).
double log_sum_exp(const arma::vec& v) {
  const double m = v.is_empty() ? -kInf : v.max();
  return m == -kInf ? -kInf : m + std::log(arma::accu(arma::exp(v - m)));
}

// The keys' log-features of one draw: extremes and each feature column's log-sum-exp (col_max + log col_sum), over
// tiles of keys in parallel, folded in tile order (identical for any thread count).
struct KeyRange {
  double max = -kInf, min = kInf;  // min over the features that are not exactly 0
  arma::rowvec col_max, col_sum;   // per feature column: the max and the sum of e^{S - max}
};

// Folds the range of later keys into r.
void fold(KeyRange& r, const KeyRange& t) {
  r.max = std::max(r.max, t.max);
  r.min = std::min(r.min, t.min);
  if (r.col_max.is_empty()) {
    r.col_max = t.col_max;
    r.col_sum = t.col_sum;
    return;
  }
  for (arma::uword m = 0; m < r.col_max.n_elem; ++m) {
    const double top = std::max(r.col_max[m], t.col_max[m]);
    if (top == -kInf) continue;
    r.col_sum[m] = r.col_sum[m] * std::exp(r.col_max[m] - top) + t.col_sum[m] * std::exp(t.col_max[m] - top);
    r.col_max[m] = top;
  }
}

// Maps with an exponent form (without groups) take it in single precision, as the simulation does (nested_attention):
// the projection by one product per tile of 1024 keys, exponents within ~1e-6 of their magnitude (the range is
// reported to 4 digits). Others: log_abs (the family's log-features in double) over tiles of 512 keys, which keeps a
// tile at M = 4096 below 32 MiB (no fresh pages).
template <typename LogAbs>
KeyRange key_range(const Estimator& e, const Draw& w, const arma::mat& K, const Kernel& k, LogAbs&& log_abs) {
  const std::optional<ExponentForm> form = e.info().positive ? e.exponent_form(w, Side::Key) : std::nullopt;
  const bool single = form && form->group.is_empty();
  const arma::uword tile = single ? 1024 : 512;
  arma::fmat Z, P32;
  arma::fvec row;
  arma::rowvec col;
  if (single) {
    Z = arma::conv_to<arma::fmat>::from(e.exponent_points(K, Side::Key));
    arma::vec rw = e.exponent_row(K, Side::Key);
    if (k.alpha != 0) rw += k.alpha * arma::sum(arma::square(K), 0).t();
    row = arma::conv_to<arma::fvec>::from(rw);
    P32 = arma::conv_to<arma::fmat>::from(form->P);
    col = form->col + 0.5 * std::log(static_cast<double>(w.count()));  // undo features()' 1/sqrt(M)
  }
  const arma::uword n_tiles = (K.n_cols + tile - 1) / tile;
  std::vector<KeyRange> tiles(n_tiles);
  for_each_block(n_tiles, [&](std::size_t t) {
    const arma::uword j0 = t * tile, j1 = std::min(K.n_cols, j0 + tile) - 1, n = j1 - j0 + 1;
    KeyRange& r = tiles[t];
    arma::fmat E;
    arma::mat S;
    if (single)
      E = Z.cols(j0, j1).t() * P32;
    else
      S = log_abs(K.cols(j0, j1), Side::Key);
    const arma::uword cols = single ? E.n_cols : S.n_cols;
    r.col_max.set_size(cols);
    r.col_sum.zeros(cols);
    std::vector<double> buf(single ? 0 : n);
    for (arma::uword m = 0; m < cols; ++m) {
      double top = -kInf, low = kInf;
      if (single) {
        float* c = E.colptr(m);
        const float ftop = simd::add_max(c, row.memptr() + j0, n);
        top = ftop + col(m);
        low = *std::min_element(c, c + n) + col(m);
        simd::exp_shifted(c, n, ftop);
        r.col_sum[m] = std::accumulate(c, c + n, 0.0);
      } else {
        const double* c = S.colptr(m);
        for (arma::uword j = 0; j < n; ++j) {
          top = std::max(top, c[j]);
          if (std::isfinite(c[j])) low = std::min(low, c[j]);
        }
        if (top != -kInf) {
          for (arma::uword j = 0; j < n; ++j) buf[j] = c[j] - top;
          simd::exp(buf.data(), buf.size());
          r.col_sum[m] = std::accumulate(buf.begin(), buf.end(), 0.0);
        }
      }
      r.max = std::max(r.max, top);
      r.min = std::min(r.min, low);
      r.col_max[m] = top;
    }
  });
  KeyRange all;
  for (const KeyRange& t : tiles) fold(all, t);
  return all;
}

FeatureRange feature_range(const Estimator& e, const Draw& w, const Inputs& in, const arma::vec& log_norm,
                           const Kernel& k) {
  FeatureRange r;
  r.stabilisable = e.info().positive;
  const arma::mat Qr = in.Qk.cols(in.rows);
  // K^(alpha) = exp(alpha |x|^2) K^(0) exp(alpha |y|^2): the row scales of its features.
  auto scale = [&](const arma::mat& X) {
    return k.alpha == 0 ? arma::vec() : arma::vec(k.alpha * arma::sum(arma::square(X), 0).t());
  };
  // Features of the sampled rows; the keys' extremes and log column sums over tiles (key_range).
  const double half_log_m = 0.5 * std::log(static_cast<double>(w.count()));  // undo features()' 1/sqrt(M)
  auto log_abs = [&](const arma::mat& X, Side side) {
    arma::mat F = r.stabilisable ? e.log_features(w, X, side, scale(X))
                                 : arma::mat(arma::log(arma::abs(e.features(w, X, side, scale(X)))));
    return arma::mat(F + half_log_m);
  };
  const arma::mat P = log_abs(Qr, Side::Query);
  // Minima over the features that are not exactly 0 (TrigRF's cos can be).
  auto finite_min = [](const arma::mat& A) {
    const arma::vec f = A.elem(arma::find_finite(A));
    return f.is_empty() ? kInf : f.min();
  };
  r.query_max = P.max();
  r.query_min = finite_min(P);
  r.row_max_min = simd::row_max(P).min();
  const KeyRange keys = key_range(e, w, in.Kk, k, log_abs);
  r.key_max = keys.max;
  r.key_min = keys.min;
  arma::rowvec key_sums = keys.col_max + arma::log(keys.col_sum);
  if (!std::isfinite(r.query_min)) r.query_min = 0;
  if (!std::isfinite(r.key_min)) r.key_min = 0;
  key_sums.transform([](double v) { return std::isnan(v) ? -kInf : v; });
  r.key_sum_max = key_sums.max();
  const double raw_max = std::max({r.query_max, r.key_max, r.key_sum_max, log_norm.max()});
  // Stabilised: query rows minus their max, keys minus the global max.
  arma::mat Ps = P;
  Ps.each_col() -= simd::row_max(P);
  r.s_query_min = finite_min(Ps);
  r.s_key_min = r.key_min - r.key_max;
  r.s_key_sum_max = r.key_sum_max - r.key_max;
  double s_norm_min = kInf, s_norm_max = -kInf;  // log of the stabilised normalisers sum_m P~_im sum_j S~_jm
  for (arma::uword i = 0; i < Ps.n_rows; ++i) {
    const double v = log_sum_exp(arma::vec((Ps.row(i) + key_sums - r.key_max).t()));
    s_norm_min = std::min(s_norm_min, v);
    s_norm_max = std::max(s_norm_max, v);
  }
  const double raw_norm_min = log_norm.min();
  for (const auto& f : number_formats()) {
    auto judge = [&](double top, double row_floor, double norm_floor) {
      if (top > f.log_max) return fmt::format("overflow: e^{:.1f} > max e^{:.1f}", top, f.log_max);
      if (row_floor < f.log_min_subnormal)
        return fmt::format("underflow: a query row's features all below e^{:.1f}", f.log_min_subnormal);
      if (norm_floor < f.log_min_subnormal)
        return fmt::format("underflow: a normaliser below e^{:.1f}", f.log_min_subnormal);
      return std::string("ok");
    };
    const std::string raw = judge(raw_max, r.row_max_min, raw_norm_min);
    const std::string stab =
        r.stabilisable ? judge(std::max(s_norm_max, r.s_key_sum_max), 0.0, s_norm_min) : std::string("n/a");
    r.verdict.emplace_back(raw, stab);
  }
  return r;
}

// ----- measurement (--validate) -----

// Per sampled row: mean over R independent draws of M features of the metric's per-draw quantity (|Y-hat_i - Y_i|^2,
// mean_a |Y-hat_ia - Y_ia|, or (D-hat_i / D_i - 1)^2 for the normalisers), and its standard error. The production path
// (approximate_attention, stabilised) with fresh draws: it shares neither the nested draws nor the blocked
// accumulation with the prediction. Fixed chunks: thread-count independent.
std::pair<arma::vec, arma::vec> measure_rows(const Estimator& e, const Inputs& in, const ExactAttention& exact,
                                             arma::uword M, Sampler sampler, std::size_t reps, std::uint64_t seed,
                                             AdviseMetric metric) {
  const arma::mat Qr = in.Qa.cols(in.rows);
  constexpr std::size_t kChunks = 16;
  const std::size_t n_chunks = std::min(kChunks, reps);
  std::vector<arma::vec> s1(n_chunks), s2(n_chunks);
  for_each_block(n_chunks, [&](std::size_t c) {
    s1[c].zeros(Qr.n_cols);
    s2[c].zeros(Qr.n_cols);
    for (std::size_t r = reps * c / n_chunks; r < reps * (c + 1) / n_chunks; ++r) {
      Rng rng(seed, Stream::MonteCarlo, r);
      const Draw w = e.draw(M, rng, sampler);
      const ApproxAttention a = approximate_attention(e, w, Qr, in.Ka, in.V);
      arma::vec err;
      if (in.normaliser)
        err = arma::square(a.normaliser % arma::exp(a.log_scale - exact.log_normaliser) - 1);
      else if (squared(metric))
        err = arma::sum(arma::square(a.Y - exact.Y), 1);
      else
        err = arma::mean(arma::abs(a.Y - exact.Y), 1);
      s1[c] += err;
      s2[c] += arma::square(err);
    }
  });
  arma::vec t1 = s1[0], t2 = s2[0];
  for (std::size_t c = 1; c < n_chunks; ++c) t1 += s1[c], t2 += s2[c];
  const double R = static_cast<double>(reps);
  const arma::vec mean = t1 / R;
  const arma::vec se = arma::sqrt(arma::clamp(t2 / R - arma::square(mean), 0, kInf) / (R - 1));
  return {mean, se};
}

// Median and 95th percentile over rows of the measured errors, and the SE of the row at the 95th percentile.
void summarise_measured(AdviceRow& row, const arma::vec& err, const arma::vec& se) {
  row.measured_median = quantile(err, 0.5);
  row.measured_p95 = quantile(err, 0.95);
  row.measured_p95_se = se[arma::index_min(arma::abs(err - row.measured_p95))];
}

// ----- one (estimator, sampler) -----

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
  for (arma::uword m : curve_grid(opt.budget)) {
    row.curve_m.push_back(static_cast<double>(m));
    row.curve_median.push_back(row.err1_median / std::sqrt(static_cast<double>(m)));
    row.curve_p95.push_back(row.err1_p95 / std::sqrt(static_cast<double>(m)));
  }
  row.curve_median_se = row.curve_p95_se = row.curve_draws = std::vector<double>(row.curve_m.size(), 0.0);
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

// A simulated prediction: per row and grid M the error and its SE (rows x grid); the curve of the median and 95th
// percentile over rows (each with the SE of the row at that quantile), M for the target and its interval.
void fill_simulated_curve(AdviceRow& row, const arma::mat& err, const arma::mat& se,
                          const std::vector<arma::uword>& grid, const std::vector<std::size_t>& draws,
                          const AdviseOptions& opt) {
  for (std::size_t k = 0; k < grid.size(); ++k) {
    const arma::vec e = err.col(k), s = se.col(k);
    const double med = quantile(e, 0.5), p95 = quantile(e, 0.95);
    row.curve_m.push_back(static_cast<double>(grid[k]));
    row.curve_median.push_back(med);
    row.curve_p95.push_back(p95);
    row.curve_median_se.push_back(s[arma::index_min(arma::abs(e - med))]);
    row.curve_p95_se.push_back(s[arma::index_min(arma::abs(e - p95))]);
    row.curve_draws.push_back(static_cast<double>(draws[k]));
  }
  row.err1_each = err.col(0);
  row.err1_median = row.curve_median.front();
  row.err1_p95 = row.curve_p95.front();
  row.err_budget_median = row.curve_median.back();
  row.err_budget_p95 = row.curve_p95.back();
  row.m_median = m_for_target(row.curve_m, row.curve_median, opt.target);
  row.m_p95 = m_for_target(row.curve_m, row.curve_p95, opt.target);
  std::vector<double> lo(row.curve_p95), hi(row.curve_p95);
  for (std::size_t k = 0; k < lo.size(); ++k) {
    lo[k] = std::max(0.0, lo[k] - 2 * row.curve_p95_se[k]);
    hi[k] += 2 * row.curve_p95_se[k];
  }
  row.m_p95_low = m_for_target(row.curve_m, lo, opt.target);
  row.m_p95_high = m_for_target(row.curve_m, hi, opt.target);
  const double M = static_cast<double>(row.m_p95 ? row.m_p95 : opt.budget);
  row.at_m_median = curve_at(row.curve_m, row.curve_median, M);
  row.at_m_p95 = curve_at(row.curve_m, row.curve_p95, M);
  row.at_m_p95_se = curve_at(row.curve_m, row.curve_p95_se, M);
}

// How far past the M where the 95th percentile + 2 SE reaches the target a simulated curve goes (unless --full-curve):
// one doubling, so the plot shows the curve's slope beyond the answer. The M and its interval are settled at that M
// already (m_for_target reads the first grid point at or below the target), so the larger M are for the plot alone:
// a second doubling (4x, as before) cost about as much again as the whole curve up to there, which at long context
// is minutes.
constexpr double kCurveBeyond = 2;

// Beyond M = kDrawsKeptUpTo the draws that continue are cut to what keeps the relative SE of the rows' mean squared
// errors at about kDrawSeGoal (2.5% on the RMS error; NestedOptions::se_goal), never below --draws / 16: rows of
// many value columns have concentrated errors, and at long context the larger M are most of the cost.
constexpr double kDrawSeGoal = 0.05;
constexpr arma::uword kDrawsKeptUpTo = 128;

// The metric's per-row errors and SEs at grid column k of a nested simulation.
std::pair<arma::vec, arma::vec> column_errors(const NestedErrors& ne, std::size_t k, const Inputs& in,
                                              AdviseMetric metric) {
  const bool tv = metric == AdviseMetric::Tv;
  const arma::mat& mean = tv ? ne.tv : squared(metric) ? ne.sq : ne.abs;
  const arma::mat& mean_se = tv ? ne.tv_se : squared(metric) ? ne.sq_se : ne.abs_se;
  return row_errors(mean.col(k), mean_se.col(k), in.norm, metric);
}

// The earliest M at which a curve may end because the target is out of reach (OutOfReach in advise.hpp): past the
// fixed draws (2 kDrawsKeptUpTo), at least 4 d, so that the two octaves the slope is read from lie at M >= d, where
// orthogonal and simplex blocks are whole and independent, and at least budget / 8: never more than three octaves
// of extrapolation.
constexpr arma::uword kOutOfReachFrom = 2 * kDrawsKeptUpTo;

// Whether the target is out of reach within the budget, read at grid point k from the 95th percentiles and their SEs
// so far (OutOfReach in advise.hpp; nullopt when it is not, or k is too early or too close to the budget to tell).
std::optional<OutOfReach> out_of_reach(const std::vector<arma::uword>& grid, const std::vector<double>& p95,
                                       const std::vector<double>& se, std::size_t k, arma::uword d,
                                       const AdviseOptions& opt) {
  const arma::uword M = grid[k];
  if (M < std::max({kOutOfReachFrom, 4 * d, opt.budget / 8}) || 2 * M > opt.budget) return std::nullopt;
  std::size_t j = k;  // two octaves back: the largest grid M' <= M / 4
  while (j > 0 && 4 * grid[j] > M) --j;
  const double lo = p95[k] - 2 * se[k], hi = p95[j] + 2 * se[j];
  if (!(lo > 0 && hi > 0)) return std::nullopt;
  OutOfReach r;
  r.from_m = M;
  r.p95_low = lo;
  r.slope = std::min(-0.5, std::log(lo / hi) / std::log(static_cast<double>(M) / static_cast<double>(grid[j])));
  r.p95_at_budget = lo * std::pow(static_cast<double>(opt.budget) / static_cast<double>(M), r.slope);
  if (!(r.p95_at_budget > opt.target)) return std::nullopt;
  r.m_for_target = static_cast<double>(M) * std::pow(lo / opt.target, -1 / r.slope);
  return r;
}

// Attention rows (or normalisers) of any sampler, simulated on the sampled rows with nested draws, up to kCurveBeyond
// times the first grid M whose 95th percentile + 2 SE is at or below the target, or to where the target is out of
// reach within the budget (the budget with --full-curve, or where neither happens).
void predict_simulated(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact,
                       Sampler sampler, const AdviseOptions& opt) {
  std::vector<arma::uword> grid = prediction_grid(opt.budget);
  std::vector<std::size_t> draws = prediction_draws(grid, opt.draws);
  std::optional<arma::uword> settled;  // the first grid M whose p95 + 2 SE <= target
  std::vector<double> p95s, ses;       // per grid point so far: the 95th percentile and its SE
  auto stop = [&](const NestedErrors& ne) {
    const std::size_t k = ne.sq.n_cols - 1;
    const auto [err, se] = column_errors(ne, k, in, opt.metric);
    p95s.push_back(quantile(err, 0.95));
    ses.push_back(se[arma::index_min(arma::abs(err - p95s.back()))]);
    if (!settled && p95s.back() + 2 * ses.back() <= opt.target) settled = grid[k];
    if (opt.full_curve) return false;
    if (!settled && (row.out_of_reach = out_of_reach(grid, p95s, ses, k, in.Qk.n_rows, opt))) return true;
    return settled && static_cast<double>(grid[k]) >= kCurveBeyond * static_cast<double>(*settled);
  };
  const NestedOptions nested{.grid = grid,
                             .draws = draws,
                             .seed = opt.seed,
                             .sampler = sampler,
                             .total_variation = opt.metric == AdviseMetric::Tv,
                             .se_goal = kDrawSeGoal,
                             .adapt_from = kDrawsKeptUpTo,
                             .min_draws = std::max<std::size_t>(2, opt.draws / 16)};
  const NestedErrors ne = simulate_nested(e, in.Qk.cols(in.rows), in.Kk, in.normaliser ? arma::mat() : in.V,
                                          in.normaliser ? arma::mat() : exact.Y, exact.log_normaliser, nested, stop);
  grid.resize(ne.sq.n_cols);
  draws = ne.draws;
  arma::mat err(ne.sq.n_rows, grid.size()), se(ne.sq.n_rows, grid.size());
  for (std::size_t k = 0; k < grid.size(); ++k) {
    const auto [e_k, se_k] = column_errors(ne, k, in, opt.metric);
    err.col(k) = e_k;
    se.col(k) = se_k;
  }
  row.method = fmt::format(
      "simulated ({} nested draws up to M = {}, {} at M = {}; seed {})", draws.front(),
      grid[std::min<std::size_t>(grid.size() - 1, std::count(draws.begin(), draws.end(), draws.front()) - 1)],
      draws.back(), grid.back(), opt.seed);
  fill_simulated_curve(row, err, se, grid, draws, opt);
}

// Kernel entries on the grid rows x keys, with a per-M error function.
void predict_kernel(AdviceRow& row, const Estimator& e, const Inputs& in, Sampler sampler, const AdviseOptions& opt) {
  const arma::mat X = in.Qk.cols(in.rows), Y = in.Kk.cols(in.keys);
  const arma::mat lv1 = e.log_var_over_k2(X, Y);
  std::function<arma::vec(arma::uword)> err;
  arma::mat S;  // |x + s y|^2 of the coupled rows (outlives err, which refers to it)
  if (sampler == Sampler::Iid) {
    err = [&](arma::uword M) { return arma::vec(arma::vectorise(arma::exp(0.5 * e.log_var_over_k2_m(X, Y, M)))); };
    row.method = "exact";
  } else {
    const auto form = isotropic_form(e);
    if (!form) throw Undefined("no exact variance with coupled projections for this family (no isotropic form)");
    S = pairwise_sq_norm_sum(X, Y, form->s);
    err = [&, f = *form](arma::uword M) {
      arma::vec out(S.n_elem);
      for (arma::uword i = 0; i < S.n_elem; ++i)
        out[i] = std::exp(0.5 * coupled_log_var_over_k2(f, e.dim(), S[i], lv1[i], M, sampler));
      return out;
    };
    row.method = "exact (coupled)";
  }
  row.log_rel_var_median = quantile(arma::vectorise(lv1), 0.5);
  row.log_rel_var_p95 = quantile(arma::vectorise(lv1), 0.95);
  const arma::vec e1 = err(1);
  row.err1_each = e1;
  row.err1_median = quantile(e1, 0.5);
  row.err1_p95 = quantile(e1, 0.95);
  const arma::vec eb = err(opt.budget);
  row.err_budget_median = quantile(eb, 0.5);
  row.err_budget_p95 = quantile(eb, 0.95);
  row.m_median = smallest_m([&](arma::uword M) { return quantile(err(M), 0.5); }, opt.target, opt.budget);
  row.m_p95 = smallest_m([&](arma::uword M) { return quantile(err(M), 0.95); }, opt.target, opt.budget);
  const arma::vec em = err(row.m_p95 ? row.m_p95 : opt.budget);
  row.at_m_median = quantile(em, 0.5);
  row.at_m_p95 = quantile(em, 0.95);
  for (arma::uword m : curve_grid(opt.budget)) {
    const arma::vec v = err(m);
    row.curve_m.push_back(static_cast<double>(m));
    row.curve_median.push_back(quantile(v, 0.5));
    row.curve_p95.push_back(quantile(v, 0.95));
  }
  row.m_p95_low = row.m_p95_high = row.m_p95;
  row.curve_median_se = row.curve_p95_se = row.curve_draws = std::vector<double>(row.curve_m.size(), 0.0);
}

// Below this share of the exact error at M = 1, a simulated normaliser curve is not trusted.
constexpr double kHeavyTailRatio = 0.5;

// Attention rows or normalisers: the normalisers' error is exact for iid features of a family with a three-point form
// (e(M) = e(1) / sqrt(M)); everything else is simulated.
void predict_rows(AdviceRow& row, const Estimator& e, const std::optional<ThreePointForm>& form, const Inputs& in,
                  const ExactAttention& exact, Sampler sampler, const AdviseOptions& opt) {
  const arma::mat X = in.Qk.cols(in.rows);
  if (in.normaliser && sampler == Sampler::Iid && form && opt.metric == AdviseMetric::Rmse) {
    const AttentionPrediction p = predict_attention_error(*form, true, opt.kernel, X, in.Kk, in.V, 1);
    row.method = "exact";
    row.err1_each = arma::exp(0.5 * p.log_rel_var);
    fill_iid_curve(row, row.err1_each, opt);
  } else {
    predict_simulated(row, e, in, exact, sampler, opt);
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

std::string quantity_label(const AdviseOptions& opt, bool normaliser) {
  if (opt.quantity == AdviseQuantity::Kernel) return "kernel entries: sqrt(Var / K^2) over sampled (query, key) pairs";
  if (opt.metric == AdviseMetric::Tv)
    return "attention rows: E (1/2) sum_j |A-hat_ij - A_ij| (total variation of the normalised attention row) over "
           "sampled query rows";
  if (normaliser) return "row normalisers D = K 1: sqrt(E (D-hat_i / D_i - 1)^2) over sampled query rows";
  switch (opt.metric) {
    case AdviseMetric::MeanAbs:
      return "attention rows: E mean_a |Y-hat_ia - Y_ia| / mean |Y| over sampled query rows";
    case AdviseMetric::RowRelative:
      return "attention rows: sqrt(E|Y-hat_i - Y_i|^2) / |Y_i| over sampled query rows";
    case AdviseMetric::Centred:
      return "attention rows: sqrt(E|Y-hat_i - Y_i|^2) / RMS_i |Y_i - v| (v the mean row of V: the centred output) "
             "over sampled query rows";
    default:
      return "attention rows: sqrt(E|Y-hat_i - Y_i|^2) / RMS_i |Y_i| over sampled query rows";
  }
}

// Per sampled row, what the metric divides by; and the share of mean |Y_i|^2 that V's mean row makes up.
arma::vec metric_norms(const arma::mat& Y, const Inputs& in, const arma::mat& V, AdviseMetric metric,
                       double& offset_share) {
  const arma::uword n = Y.n_rows;
  const arma::vec one(n, arma::fill::ones);
  if (in.normaliser || metric == AdviseMetric::Tv) return one;
  const arma::rowvec v = arma::mean(V, 0);
  const double mean_sq = arma::accu(arma::square(Y)) / static_cast<double>(n);
  offset_share = mean_sq > 0 ? std::min(1.0, arma::dot(v, v) / mean_sq) : 0.0;
  require(mean_sq > 0, "every sampled output row is 0: relative errors are undefined (values V are 0?)");
  switch (metric) {
    case AdviseMetric::MeanAbs:
      return one * (arma::accu(arma::abs(Y)) / static_cast<double>(Y.n_elem));
    case AdviseMetric::RowRelative: {
      const arma::vec r = arma::sqrt(arma::sum(arma::square(Y), 1));
      require(r.min() > 0, "metric row-relative: output row {} is 0 (its relative error is undefined; use rmse)",
              in.rows[r.index_min()]);
      return r;
    }
    case AdviseMetric::Centred: {
      arma::mat C = Y;
      C.each_row() -= v;
      const double rms = std::sqrt(arma::accu(arma::square(C)) / static_cast<double>(n));
      require(rms > 0, "metric centred: every sampled output row equals V's mean row (nothing varies to measure)");
      return one * rms;
    }
    default:
      return one * std::sqrt(mean_sq);
  }
}

bool applicable(const Family& f, AdviceRow& row) {
  if (f.kind == Kind::Learned || !f.exact_variance) {
    row.status = "not applicable";
    row.reason = "no exact variance (a learned map or an estimator without log_var_over_k2)";
    return false;
  }
  return true;
}

std::string percent(double v) { return fmt::format("{:.3g}%", 100 * v); }

std::string needs(const AdviceRow& r, const AdviseOptions& opt) {
  if (r.m_p95) return fmt::format("M = {}", r.m_p95);
  if (r.out_of_reach)
    return fmt::format("M > {} (the budget; at least {:.0f} by extrapolation from M = {})", opt.budget,
                       r.out_of_reach->m_for_target, r.out_of_reach->from_m);
  return fmt::format("M > {} (the budget)", opt.budget);
}

std::string row_label(const AdviceRow& r) {
  return r.sampler == "iid" ? r.estimator : fmt::format("{} ({})", r.estimator, r.sampler);
}

// The FLOPs and memory of exact and random-feature attention at every M some row needs.
void attention_costs(Advice& a) {
  const double Lq = static_cast<double>(a.Lq), Lk = static_cast<double>(a.Lk), d = static_cast<double>(a.d);
  const double dv = static_cast<double>(a.dv ? a.dv : 1);
  // Exact: Q K^T (2 Lq Lk d), exp (Lq Lk), A [V 1] (2 Lq Lk (dv + 1)); scores held in fp32 if materialised.
  a.cost.exact_flops = Lq * Lk * (2 * d + 1 + 2 * (dv + 1));
  a.cost.exact_bytes = 4 * (Lq * Lk + (Lq + Lk) * d + Lk * dv + Lq * dv);
  std::vector<arma::uword> ms;
  for (const auto& r : a.rows)  // (a hybrid's cost is not that of M features: left out)
    if (r.status == "ok" && r.m_p95 && r.note.rfind("a hybrid", 0) != 0) ms.push_back(r.m_p95);
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  for (arma::uword m : ms) {
    const double M = static_cast<double>(m);
    // Features 2 (Lq + Lk) M d + exp (Lq + Lk) M, S^T [V 1] 2 Lk M (dv + 1), P (...) 2 Lq M (dv + 1).
    const double flops = (Lq + Lk) * M * (2 * d + 1) + 2 * (Lq + Lk) * M * (dv + 1);
    a.cost.m.push_back(m);
    a.cost.rf_flops.push_back(flops);
    a.cost.rf_bytes.push_back(4 * ((Lq + Lk) * M + M * (dv + 1) + (Lq + Lk) * d + Lk * dv + Lq * dv));
    // Lq = Lk = L: exact L^2 (2d + 2dv + 3) against RF 2L M (2d + 2dv + 3).
    a.cost.crossover_length.push_back(2 * M);
  }
}

// The recommendation: the smallest M reaching the target at the 95th percentile; ties to the smaller predicted error.
void choose_best(Advice& a) {
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    const auto& r = a.rows[i];
    if (r.status != "ok" || !r.m_p95) continue;
    if (!a.best || std::pair(r.m_p95, r.at_m_p95) < std::pair(a.rows[*a.best].m_p95, a.rows[*a.best].at_m_p95))
      a.best = i;
  }
}

// Exact and random-feature attention timed on this machine (the best row's estimator at its M), median of 3.
void time_attention(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted,
                    const std::function<void(const std::string&)>& say) {
  const auto& opt = a.options;
  say("timing exact and random-feature attention on this machine");
  const AdviceRow& b = a.rows[*a.best];
  const Estimator* e = nullptr;
  for (const auto& f : fitted)
    if (f && f->info().name == b.estimator) e = f.get();
  auto median3 = [](auto&& run) {
    std::vector<double> t;
    for (int k = 0; k < 3; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[1];
  };
  const arma::uword timed = std::min(in.Qa.n_cols, kExactTimedRows);
  a.cost.exact_timed_rows = timed;
  a.cost.exact_seconds = median3([&] { exact_attention(in.Qa.head_cols(timed), in.Ka, in.V); }) *
                         static_cast<double>(in.Qa.n_cols) / static_cast<double>(timed);
  const double rf_bytes = 8.0 * static_cast<double>(in.Qa.n_cols + in.Ka.n_cols) * static_cast<double>(b.m_p95);
  if (e && rf_bytes > kMaxFeatureBytes)
    a.cost.rf_not_timed =
        fmt::format("its features at M = {} for {} queries and {} keys need {:.3g} GB (at most {:.3g} GB)", b.m_p95,
                    in.Qa.n_cols, in.Ka.n_cols, rf_bytes / 1e9, kMaxFeatureBytes / 1e9);
  else if (e) {
    Rng rng(opt.seed, Stream::Features, 1);
    a.cost.rf_seconds = median3([&] {
      const Draw w = e->draw(b.m_p95, rng, parse_sampler(b.sampler));
      approximate_attention(*e, w, in.Qa, in.Ka, in.V);
    });
    a.cost.timed_m = b.m_p95;
    a.cost.timed_estimator = row_label(b);
  }
}

std::string error_name(const Advice& a, const Inputs& in) {
  return a.options.quantity == AdviseQuantity::Kernel ? "kernel-entry error"
         : in.normaliser                              ? "row-normaliser error"
                                                      : "row error";
}

// The words when no row reaches the target: the closest one, by the lowest 95th percentile at the largest M every
// curve reached (the budget unless some curve ended where the target is out of reach).
std::string unreached(const Advice& a, const Inputs& in) {
  const auto& opt = a.options;
  double common = static_cast<double>(opt.budget);
  for (const auto& r : a.rows)
    if (r.status == "ok" && !r.curve_m.empty()) common = std::min(common, r.curve_m.back());
  auto at = [&](const AdviceRow& r) { return curve_at(r.curve_m, r.curve_p95, common); };
  const AdviceRow* closest = nullptr;
  for (const auto& r : a.rows)
    if (r.status == "ok" && !r.curve_m.empty() && (!closest || at(r) < at(*closest))) closest = &r;
  if (!closest) return "No estimator could be evaluated on these inputs (see the reasons in the table).";
  std::string s = fmt::format(
      "No estimator reaches a 95th-percentile {} of {} within M <= {}. The closest is {}: {} at M = {}.",
      error_name(a, in), percent(opt.target), opt.budget, row_label(*closest), percent(at(*closest)), common);
  if (closest->out_of_reach)
    s += fmt::format(
        " Its curve ended there because the target is out of reach: extrapolated, it needs at least {:.0f} features "
        "(see OutOfReach in tasks/advise.hpp).",
        closest->out_of_reach->m_for_target);
  return s + " Raise --budget, or accept a larger --target.";
}

// The words for the best row, the others ranked, the noise of its M and what V's offset does to the metric.
std::string best_and_others(const Advice& a, const Inputs& in) {
  const auto& opt = a.options;
  const std::string what = error_name(a, in);
  const AdviceRow& b = a.rows[*a.best];
  std::string s =
      fmt::format("{}{}, M = {}: predicted 95th-percentile {} {}{} (median {}; {}).", b.estimator,
                  b.sampler == "iid" ? "" : " with " + b.sampler + " features", b.m_p95, what, percent(b.at_m_p95),
                  b.at_m_p95_se > 0 ? " +- " + percent(b.at_m_p95_se) : "", percent(b.at_m_median), b.method);
  std::vector<const AdviceRow*> ranked;  // the others, fewest features first (unreached last)
  for (const auto& r : a.rows)
    if (r.status == "ok" && &r != &b) ranked.push_back(&r);
  std::stable_sort(ranked.begin(), ranked.end(), [](const AdviceRow* x, const AdviceRow* y) {
    return (x->m_p95 ? x->m_p95 : ~arma::uword{0}) < (y->m_p95 ? y->m_p95 : ~arma::uword{0});
  });
  std::vector<std::string> others;
  for (const AdviceRow* r : ranked)
    if (others.size() < 4) others.push_back(row_label(*r) + " needs " + needs(*r, opt));
  if (!others.empty()) {
    s += " ";
    for (std::size_t i = 0; i < others.size(); ++i) s += (i ? "; " : "") + others[i];
    s += ".";
  }
  if (b.m_p95_low != b.m_p95_high)
    s += fmt::format(" Within the simulation's noise (+-2 SE) the M for the target lies in [{}, {}].", b.m_p95_low,
                     b.m_p95_high ? std::to_string(b.m_p95_high) : "> " + std::to_string(opt.budget));
  if (a.offset_share > 0.5 && !in.normaliser &&
      (opt.metric == AdviseMetric::Rmse || opt.metric == AdviseMetric::MeanAbs ||
       opt.metric == AdviseMetric::RowRelative))
    s += fmt::format(
        " V's mean row makes up {} of mean |Y_i|^2, so errors relative to |Y| look small for any M: --metric centred "
        "gives the error relative to the centred output Y - mean(V).",
        percent(a.offset_share));
  return s;
}

// The words on fp16 and on the cost of the best row.
std::string format_and_cost(const Advice& a, const AdviceRow& b) {
  const auto& opt = a.options;
  std::string s;
  if (b.range) {
    const auto& fmts = number_formats();
    for (std::size_t k = 0; k < fmts.size(); ++k)
      if (fmts[k].name == "fp16") {
        const auto& [raw, stab] = b.range->verdict[k];
        s += fmt::format(" fp16: {} without the stabiliser, {} with it.", raw, stab);
      }
  }
  if (opt.quantity == AdviseQuantity::Attention && !a.cost.m.empty()) {
    const auto it = std::find(a.cost.m.begin(), a.cost.m.end(), b.m_p95);
    const std::size_t k = static_cast<std::size_t>(it - a.cost.m.begin());
    s += fmt::format(
        " Cost at L = {}: {:.3g} GFLOP against {:.3g} for exact attention (random features are cheaper "
        "for L > {:.0f} when Lq = Lk).",
        a.Lk, a.cost.rf_flops[k] / 1e9, a.cost.exact_flops / 1e9, a.cost.crossover_length[k]);
    if (a.cost.rf_seconds >= 0)
      s +=
          fmt::format(" Measured on this machine: {:.3g} s against {:.3g} s.", a.cost.rf_seconds, a.cost.exact_seconds);
  }
  return s;
}

void cost_and_recommendation(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted,
                             const std::function<void(const std::string&)>& say) {
  attention_costs(a);
  choose_best(a);
  if (a.options.timing && a.best && a.options.quantity == AdviseQuantity::Attention) time_attention(a, in, fitted, say);
  if (!a.best) {
    a.recommendation = unreached(a, in);
    return;
  }
  a.recommendation = best_and_others(a, in) + format_and_cost(a, a.rows[*a.best]);
}

}  // namespace

std::string to_string(AdviseQuantity q) { return q == AdviseQuantity::Attention ? "attention" : "kernel"; }

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> n{"rmse", "mean-abs", "row-relative", "centred", "tv"};
  return n;
}

std::string to_string(AdviseMetric m) { return metric_names()[static_cast<std::size_t>(m)]; }

AdviseMetric parse_metric(const std::string& name) {
  const auto& n = metric_names();
  const auto it = std::find(n.begin(), n.end(), name);
  require(it != n.end(), "metric: expected one of rmse, mean-abs, row-relative, centred, tv, got '{}'", name);
  return static_cast<AdviseMetric>(it - n.begin());
}

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

const std::vector<NumberFormat>& number_formats() {
  // log of: largest finite, smallest normal, smallest subnormal.
  static const std::vector<NumberFormat> f{
      {"fp32", std::log(std::numeric_limits<float>::max()), std::log(std::numeric_limits<float>::min()),
       std::log(std::numeric_limits<float>::denorm_min())},
      {"bf16", std::log(3.3895313892515355e38), std::log(std::numeric_limits<float>::min()), std::log(9.1835e-41)},
      {"fp16", std::log(65504.0), std::log(6.103515625e-05), std::log(5.960464477539063e-08)}};
  return f;
}

bool AdviceRow::within_target(double target) const {
  return validate_reps == 0 || measured_p95 - 3 * measured_p95_se <= target;
}

nlohmann::json to_json(const AdviseOptions& o) {
  std::vector<std::string> samplers;
  for (Sampler x : o.samplers) samplers.push_back(to_string(x));
  return {{"quantity", to_string(o.quantity)},
          {"kernel", o.kernel.name()},
          {"scaling", o.scale_sqrt_d ? "sqrt-d" : "none"},
          {"target", o.target},
          {"budget", o.budget},
          {"estimators", o.estimators},
          {"samplers", samplers},
          {"rows", o.rows},
          {"pairs", o.pairs},
          {"validate", o.validate},
          {"metric", to_string(o.metric)},
          {"draws", o.draws},
          {"full_curve", o.full_curve},
          {"seed", o.seed},
          {"timing", o.timing}};
}

// The inputs and options checked together (the parser checked each option alone).
void check_inputs(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt) {
  validate_points(Q, "queries");
  validate_points(K, "keys");
  require(Q.n_rows == K.n_rows, "queries and keys must have the same dimension d, got {} and {}", Q.n_rows, K.n_rows);
  if (!V.is_empty()) {
    require(V.n_rows == K.n_cols, "values must have one row per key ({} keys), got {} rows", K.n_cols, V.n_rows);
    require(V.is_finite(), "values must be finite (found NaN or Inf)");
  }
  require(opt.target > 0 && std::isfinite(opt.target), "target must be a number > 0, got {}", opt.target);
  require(opt.budget >= 1, "budget must be >= 1, got {}", opt.budget);
  require(opt.rows >= 2 && opt.pairs >= 1, "rows must be >= 2 and pairs >= 1, got {} and {}", opt.rows, opt.pairs);
  require(opt.validate == 0 || opt.validate >= 2, "validate needs at least 2 draws, got {}", opt.validate);
  require(opt.draws >= 2, "draws must be >= 2, got {}", opt.draws);
  require(opt.quantity == AdviseQuantity::Attention || opt.metric == AdviseMetric::Rmse,
          "metric {} is for attention rows (quantity kernel has the relative error of entries only)",
          to_string(opt.metric));
  require(!V.is_empty() || opt.metric == AdviseMetric::Rmse || opt.metric == AdviseMetric::Tv ||
              opt.quantity == AdviseQuantity::Kernel,
          "metric {} needs values V (without them: rmse, the normalisers' error, or tv)", to_string(opt.metric));
  // --validate measures with one draw of the keys' and sampled queries' features at up to the budget, whole: bounded.
  // (The simulation and the range check take the keys in tiles.)
  const double feature_bytes =
      8.0 * static_cast<double>(K.n_cols + std::min<arma::uword>(Q.n_cols, opt.rows)) * static_cast<double>(opt.budget);
  require(opt.validate == 0 || feature_bytes <= kMaxFeatureBytes,
          "--validate at budget {} needs {:.3g} GB for one draw of features of {} keys (at most {:.3g} GB): give a "
          "smaller budget or leave out --validate",
          opt.budget, feature_bytes / 1e9, K.n_cols, kMaxFeatureBytes / 1e9);
  // The total variation keeps each nested draw's unnormalised attention rows (sampled rows x keys) until it is done.
  const double tv_bytes = 8.0 * static_cast<double>(opt.draws) *
                          static_cast<double>(std::min<arma::uword>(Q.n_cols, opt.rows)) *
                          static_cast<double>(K.n_cols);
  require(opt.metric != AdviseMetric::Tv || tv_bytes <= kMaxFeatureBytes,
          "metric tv with {} draws of {} rows x {} keys needs {:.3g} GB (at most {:.3g} GB): give fewer --rows or "
          "--draws",
          opt.draws, std::min<arma::uword>(Q.n_cols, opt.rows), K.n_cols, tv_bytes / 1e9, kMaxFeatureBytes / 1e9);
  require(opt.quantity == AdviseQuantity::Kernel || opt.kernel.alpha == 0,
          "kernel {} is only used with quantity kernel (attention is softmax attention)", opt.kernel.name());
  require(opt.quantity == AdviseQuantity::Attention || V.is_empty(), "values are only used with quantity attention");
}

// The scaled points, sampled rows and keys, and the exact attention rows the errors are relative to.
Inputs prepare(Advice& a, const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt) {
  a.options = opt;
  a.d = Q.n_rows;
  a.Lq = Q.n_cols;
  a.Lk = K.n_cols;
  a.dv = V.n_cols;
  const double root4 = std::pow(static_cast<double>(a.d), 0.25);
  Inputs in;
  in.Qk = opt.scale_sqrt_d ? arma::mat(Q / root4) : Q;
  in.Kk = opt.scale_sqrt_d ? arma::mat(K / root4) : K;
  in.Qa = opt.scale_sqrt_d ? Q : arma::mat(Q * root4);
  in.Ka = opt.scale_sqrt_d ? K : arma::mat(K * root4);
  in.normaliser = opt.quantity == AdviseQuantity::Attention && V.is_empty();
  in.V = V.is_empty() ? arma::mat(arma::ones(a.Lk, 1)) : V;
  in.rows = sample_indices(a.Lq, opt.rows, opt.seed, 1);
  in.keys = sample_indices(a.Lk, std::max<arma::uword>(1, opt.pairs / in.rows.n_elem), opt.seed, 2);
  a.sampled_rows = in.rows;
  a.quantity_label = quantity_label(opt, in.normaliser);
  return in;
}

// --validate: R fresh draws at the row's M through the production code, the measured error next to the prediction.
void validate_row(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact, Sampler sampler,
                  const AdviseOptions& opt, const std::function<void(const std::string&)>& say) {
  row.validate_reps = opt.validate;
  row.validate_m = row.m_p95;
  say(fmt::format("validating {} ({}) at M = {} with {} draws", row.estimator, row.sampler, row.validate_m,
                  opt.validate));
  if (opt.quantity == AdviseQuantity::Attention) {
    const auto [mean, se] = measure_rows(e, in, exact, row.validate_m, sampler, opt.validate, opt.seed, opt.metric);
    const auto [err, err_se] = row_errors(mean, se, in.norm, opt.metric);
    summarise_measured(row, err, err_se);
  } else {
    const MonteCarloResult mc = simulate(e, opt.kernel, in.Qk.cols(in.rows), in.Kk.cols(in.keys),
                                         {opt.validate, row.validate_m, opt.seed, sampler});
    const arma::vec k2 = arma::vectorise(arma::square(mc.kernel.exact));
    const auto [err, err_se] =
        row_errors(arma::vectorise(mc.kernel.variance) / k2, arma::vectorise(mc.kernel.se_variance) / k2,
                   arma::ones(k2.n_elem), AdviseMetric::Rmse);
    summarise_measured(row, err, err_se);
  }
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
    predict_rows(row, e, form, in, exact, sampler, opt);
    say(fmt::format("predicted {} ({}) in {:.1f} s", f.name, row.sampler, seconds_since(t0)));
  } else {
    say(fmt::format("predicting {} ({})", f.name, row.sampler));
    predict_kernel(row, e, in, sampler, opt);
  }
  for (double v : {row.err1_median, row.err1_p95, row.at_m_median, row.at_m_p95, row.err_budget_p95,
                   row.log_rel_var_median, row.log_rel_var_p95})
    if (!std::isfinite(v) || !row.err1_each.is_finite())
      throw NumericalError(fmt::format(
          "the predicted error is not finite (inputs too large: the largest log normaliser is {:.4g}; scale "
          "them down)",
          log_norm.max()));
  // A hybrid's feature map has ~M^2 columns (263168 at M = 256 for hrf-angular): no draw of it at M here.
  const bool draws = f.kind != Kind::Hybrid;
  if (!draws)
    row.note = "a hybrid: its features have ~M^2 columns, so neither the feature range nor --validate is drawn";
  Rng rng(opt.seed, Stream::Features, 0);
  if (draws)
    row.range = feature_range(e, e.draw(row.m_p95 ? row.m_p95 : opt.budget, rng, sampler), in, log_norm, opt.kernel);
  const bool measurable = opt.quantity == AdviseQuantity::Kernel || opt.metric != AdviseMetric::Tv;
  if (opt.validate && row.m_p95 && draws && !measurable)
    row.note = "--validate measures output rows and normalisers, not the total variation: not validated";
  if (opt.validate && row.m_p95 && draws && measurable)  // where the target is not reached: no M to check
    validate_row(row, e, in, exact, sampler, opt, say);
}

Advice advise(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt,
              const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& m) {
    if (progress) progress(m);
  };
  check_inputs(Q, K, V, opt);

  Advice a;
  Inputs in = prepare(a, Q, K, V, opt);
  // Exact attention on the sampled rows: Y, what the metric divides by, and the normalisers.
  const ExactAttention exact = exact_attention(in.Qa.cols(in.rows), in.Ka, in.V);
  if (opt.quantity == AdviseQuantity::Attention) in.norm = metric_norms(exact.Y, in, V, opt.metric, a.offset_share);
  const arma::vec log_norm = opt.quantity == AdviseQuantity::Kernel
                                 ? arma::vec(arma::max(log_kernel(opt.kernel, in.Qk.cols(in.rows), in.Kk), 1))
                                 : exact.log_normaliser;

  std::vector<Family> families;
  if (opt.estimators.empty())
    families = estimator_families();
  else
    for (const auto& n : opt.estimators) families.push_back(find_family(n));
  std::vector<std::unique_ptr<Estimator>> fitted;
  for (const Family& f : families) {
    AdviceRow base;
    base.estimator = f.name;
    if (!applicable(f, base)) {
      base.sampler = "any";
      a.rows.push_back(base);
      continue;
    }
    say("fitting " + f.name);
    std::unique_ptr<Estimator> e;
    try {
      e = make_estimator(f.name, in.Qk, in.Kk);
    } catch (const std::exception& ex) {
      base.sampler = "any";
      base.status = "failed";
      base.reason = std::string("fitting failed: ") + ex.what();
      a.rows.push_back(base);
      fitted.push_back(nullptr);
      continue;
    }
    std::optional<ThreePointForm> form;
    if (opt.quantity == AdviseQuantity::Attention) form = three_point_form(*e);
    for (Sampler sampler : opt.samplers) {
      AdviceRow row = base;
      row.sampler = to_string(sampler);
      try {
        predict_row(row, f, *e, form, in, exact, log_norm, sampler, opt, say);
      } catch (const Undefined& ex) {
        row = base;
        row.sampler = to_string(sampler);
        row.status = "not applicable";
        row.reason = ex.what();
      } catch (const std::exception& ex) {
        row = base;
        row.sampler = to_string(sampler);
        row.status = "failed";
        row.reason = ex.what();
      }
      a.rows.push_back(std::move(row));
    }
    fitted.push_back(std::move(e));
  }
  cost_and_recommendation(a, in, fitted, say);
  return a;
}

namespace {

// The feature range of one row: its extremes and, per number format, whether they hold without and with the
// stabiliser.
nlohmann::json range_json(const FeatureRange& range) {
  nlohmann::json v;
  const auto& f = number_formats();
  for (std::size_t k = 0; k < f.size(); ++k)
    v[f[k].name] = {{"raw", range.verdict[k].first}, {"stabilised", range.verdict[k].second}};
  return {{"stabilisable", range.stabilisable},
          {"query_max", range.query_max},
          {"query_min", range.query_min},
          {"key_max", range.key_max},
          {"key_min", range.key_min},
          {"key_sum_max", range.key_sum_max},
          {"row_max_min", range.row_max_min},
          {"stabilised_query_min", range.s_query_min},
          {"stabilised_key_min", range.s_key_min},
          {"stabilised_key_sum_max", range.s_key_sum_max},
          {"formats", v}};
}

nlohmann::json row_json(const AdviceRow& r, const AdviseOptions& options) {
  nlohmann::json j = {{"estimator", r.estimator}, {"sampler", r.sampler}, {"status", r.status}};
  if (r.status != "ok") {
    j["reason"] = r.reason;
    return j;
  }
  if (!r.note.empty()) j["note"] = r.note;
  // A simulated curve ends past the answer unless --full-curve: no error at the budget then.
  const bool at_budget = !r.curve_m.empty() && r.curve_m.back() == static_cast<double>(options.budget);
  j.update(
      {{"method", r.method},
       {"log_rel_var_median", r.log_rel_var_median},
       {"log_rel_var_p95", r.log_rel_var_p95},
       {"error_at_1_median", r.err1_median},
       {"error_at_1_p95", r.err1_p95},
       {"m_for_target_median", r.m_median ? nlohmann::json(r.m_median) : nlohmann::json(nullptr)},
       {"m_for_target_p95", r.m_p95 ? nlohmann::json(r.m_p95) : nlohmann::json(nullptr)},
       {"error_at_m_median", r.at_m_median},
       {"error_at_m_p95", r.at_m_p95},
       {"error_at_budget_median", at_budget ? nlohmann::json(r.err_budget_median) : nlohmann::json(nullptr)},
       {"error_at_budget_p95", at_budget ? nlohmann::json(r.err_budget_p95) : nlohmann::json(nullptr)},
       {"curve_end_m", r.curve_m.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.curve_m.back())},
       {"error_at_m_p95_se", r.at_m_p95_se},
       {"out_of_reach", r.out_of_reach ? nlohmann::json{{"from_m", r.out_of_reach->from_m},
                                                        {"p95_minus_2se", r.out_of_reach->p95_low},
                                                        {"slope", r.out_of_reach->slope},
                                                        {"error_at_budget_p95_at_least", r.out_of_reach->p95_at_budget},
                                                        {"m_for_target_p95_at_least", r.out_of_reach->m_for_target}}
                                       : nlohmann::json(nullptr)},
       {"m_for_target_p95_interval",
        {r.m_p95_low ? nlohmann::json(r.m_p95_low) : nlohmann::json(nullptr),
         r.m_p95_high ? nlohmann::json(r.m_p95_high) : nlohmann::json(nullptr)}},
       {"curve",
        {{"m", r.curve_m},
         {"median", r.curve_median},
         {"p95", r.curve_p95},
         {"median_se", r.curve_median_se},
         {"p95_se", r.curve_p95_se},
         {"draws", r.curve_draws}}}});
  if (r.range) j["range"] = range_json(*r.range);
  if (r.validate_reps)
    j["validation"] = {{"draws", r.validate_reps},
                       {"m", r.validate_m},
                       {"measured_median", r.measured_median},
                       {"measured_p95", r.measured_p95},
                       {"measured_p95_se", r.measured_p95_se},
                       {"within_target", r.within_target(options.target)}};
  return j;
}

nlohmann::json cost_json(const AdviceCost& c) {
  nlohmann::json cost = {
      {"exact_flops", c.exact_flops}, {"exact_bytes", c.exact_bytes}, {"m", c.m},
      {"rf_flops", c.rf_flops},       {"rf_bytes", c.rf_bytes},       {"crossover_length", c.crossover_length}};
  if (c.exact_seconds >= 0)
    cost["measured_on_this_machine"] = {{"exact_seconds", c.exact_seconds},
                                        {"rf_seconds", c.rf_seconds},
                                        {"rf_estimator", c.timed_estimator},
                                        {"rf_m", c.timed_m},
                                        {"exact_timed_rows", c.exact_timed_rows}};
  if (!c.rf_not_timed.empty()) cost["measured_on_this_machine"]["rf_not_timed"] = c.rf_not_timed;
  return cost;
}

}  // namespace

nlohmann::json to_json(const Advice& a) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : a.rows) rows.push_back(row_json(r, a.options));
  const nlohmann::json cost = cost_json(a.cost);
  return {{"options", to_json(a.options)},
          {"inputs", {{"d", a.d}, {"Lq", a.Lq}, {"Lk", a.Lk}, {"dv", a.dv}}},
          {"values_offset_share", a.offset_share},
          {"quantity", a.quantity_label},
          {"sampled_rows", a.sampled_rows.n_elem},
          {"rows", rows},
          {"best", a.best ? nlohmann::json(row_label(a.rows[*a.best])) : nlohmann::json(nullptr)},
          {"cost", cost},
          {"recommendation", a.recommendation}};
}

}  // namespace kestrel
