// advise's inputs: the checks of inputs and options together, the points as the estimators see them, the seeded
// sample of query rows (and keys), and what each row's error is relative to (the metric's norms).
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"

namespace kestrel::advise_steps {

namespace {

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

// Causal: one row drawn uniformly from each of n strata of positions [floor(s L / n), floor((s + 1) L / n)): every
// part of the sequence (the early rows, which see few keys, included) is in the sample in proportion (all when n >= L).
arma::uvec stratified_indices(arma::uword L, arma::uword n, std::uint64_t seed, std::uint64_t stream_index) {
  if (n >= L) return arma::regspace<arma::uvec>(0, L - 1);
  Rng rng(seed, Stream::User, stream_index);
  arma::uvec idx(n);
  for (arma::uword s = 0; s < n; ++s) {
    const arma::uword lo = s * L / n, hi = (s + 1) * L / n;
    idx(s) = lo + std::min<arma::uword>(hi - lo - 1, static_cast<arma::uword>(rng.uniform() * double(hi - lo)));
  }
  return idx;
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

}  // namespace

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
  require(!opt.causal || opt.quantity == AdviseQuantity::Attention,
          "--causal is for quantity attention (kernel entries have no mask)");
  require(!opt.causal || Q.n_cols == K.n_cols,
          "--causal needs one query per key position (query i attends to keys 0..i), got {} queries and {} keys",
          Q.n_cols, K.n_cols);
  require(!opt.causal || opt.metric != AdviseMetric::Tv,
          "metric tv is not simulated with --causal: use rmse, mean-abs, row-relative or centred");
  require(!opt.causal || opt.validate == 0,
          "--validate measures bidirectional attention only: leave it out with --causal (the causal prediction is "
          "checked against independent simulations in the tests)");
  require(opt.from_position == 0 || opt.causal,
          "--from-position {} needs --causal (it selects the rows from that position of a causal sequence)",
          opt.from_position);
  require(opt.from_position < K.n_cols,
          "--from-position {} is beyond the sequence (positions 0..{}): give a smaller one", opt.from_position,
          K.n_cols - 1);
}

namespace {

// --from-position needs two sampled rows at or beyond it (an error over rows needs two): an option error named with
// the range that has them (the sampled rows are stratified over positions, so the range is known before any draw).
void check_from_position(const arma::uvec& positions, const AdviseOptions& opt) {
  if (opt.from_position == 0) return;
  const arma::uword n = positions.n_elem, beyond = arma::accu(positions >= opt.from_position);
  require(n >= 2, "--from-position {} needs at least 2 sampled rows, got --rows {}: give --rows 2 or more",
          opt.from_position, n);
  require(beyond >= 2,
          "--from-position {}: only {} of the {} sampled rows are at or beyond it (the last two at positions {} and "
          "{}); give --from-position 1..{}, or more --rows",
          opt.from_position, beyond, n, positions(n - 2), positions(n - 1), positions(n - 2));
}

}  // namespace

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
  in.rows = opt.causal ? stratified_indices(a.Lq, opt.rows, opt.seed, 1) : sample_indices(a.Lq, opt.rows, opt.seed, 1);
  if (opt.causal) in.positions = in.rows;
  check_from_position(in.positions, opt);
  in.keys = sample_indices(a.Lk, std::max<arma::uword>(1, opt.pairs / in.rows.n_elem), opt.seed, 2);
  a.sampled_rows = in.rows;
  a.quantity_label = quantity_label(opt, in.normaliser);
  return in;
}

namespace {

// Causal: exact attention of the queries at the given positions, each over keys 0..position (the stable log-sum-exp).
ExactAttention causal_rows(const Inputs& in, const arma::uvec& positions) {
  const arma::uword n = positions.n_elem;
  ExactAttention out{arma::mat(n, in.V.n_cols), arma::vec(n)};
  for_each_block(n, [&](std::size_t r) {
    const arma::uword p = positions(r);
    arma::vec logit = in.Kk.cols(0, p).t() * in.Qk.col(p);
    const double top = logit.max();
    const arma::vec w = arma::exp(logit - top);
    const double sum = arma::accu(w);
    out.log_normaliser(r) = top + std::log(sum);
    out.Y.row(r) = (w.t() * in.V.rows(0, p)) / sum;
  });
  return out;
}

// Causal, rows sampled one per stratum of positions: the positions before this one (rounded up to a stratum's end)
// enter the pooled norms exactly, every one of them.
constexpr arma::uword kExactNormPositions = 1024;

// The rows a pooled norm averages over, with weights (none: the sampled rows, each once). Causal with fewer sampled
// rows than positions: early rows see few keys, so |Y_i| is largest there and decides the mean over positions, and one
// sampled row per stratum would make the norm hinge on which early row was drawn (at L = 32768 with 512 rows the
// reported errors moved 2x between seeds). So the positions before kExactNormPositions are all taken exactly, and
// each sampled row beyond stands for its stratum (weight: the stratum's size): the mean over every position.
struct NormRows {
  arma::mat Y;
  arma::vec w;
};
NormRows norm_rows(const arma::mat& Y, const Inputs& in) {
  const arma::uword L = in.Kk.n_cols, n = in.rows.n_elem;
  if (in.positions.is_empty() || n >= L) return {Y, {}};
  arma::uword s0 = 0;  // the first stratum [s L / n, (s + 1) L / n) beyond the exact positions
  while (s0 < n && s0 * L / n < kExactNormPositions) ++s0;
  const arma::uword e = s0 * L / n;
  NormRows out{causal_rows(in, arma::regspace<arma::uvec>(0, e - 1)).Y, arma::ones(e)};
  if (s0 < n) {
    out.Y = arma::join_cols(out.Y, Y.rows(s0, n - 1));
    arma::vec w(n - s0);
    for (arma::uword s = s0; s < n; ++s) w(s - s0) = static_cast<double>((s + 1) * L / n - s * L / n);
    out.w = arma::join_cols(out.w, w);
  }
  return out;
}

}  // namespace

// Per sampled row, what the metric divides by; and the share of mean |Y_i|^2 that V's mean row makes up. The pooled
// norms are means over the rows of norm_rows.
arma::vec metric_norms(const arma::mat& Y, const Inputs& in, const arma::mat& V, AdviseMetric metric,
                       double& offset_share) {
  const arma::uword n = Y.n_rows;
  const arma::vec one(n, arma::fill::ones);
  if (in.normaliser || metric == AdviseMetric::Tv) return one;
  const NormRows nr = norm_rows(Y, in);
  // The mean over those rows of a per-entry quantity's row sums.
  auto mean_of = [&](const arma::mat& Z) {
    return nr.w.is_empty() ? arma::accu(Z) / static_cast<double>(Z.n_rows)
                           : arma::dot(nr.w, arma::sum(Z, 1)) / arma::accu(nr.w);
  };
  const arma::rowvec v = arma::mean(V, 0);
  const double mean_sq = mean_of(arma::square(nr.Y));
  offset_share = mean_sq > 0 ? std::min(1.0, arma::dot(v, v) / mean_sq) : 0.0;
  require(mean_sq > 0, "every sampled output row is 0: relative errors are undefined (values V are 0?)");
  switch (metric) {
    case AdviseMetric::MeanAbs:
      return one * (nr.w.is_empty() ? arma::accu(arma::abs(Y)) / static_cast<double>(Y.n_elem)
                                    : mean_of(arma::abs(nr.Y)) / static_cast<double>(Y.n_cols));
    case AdviseMetric::RowRelative: {
      const arma::vec r = arma::sqrt(arma::sum(arma::square(Y), 1));
      require(r.min() > 0, "metric row-relative: output row {} is 0 (its relative error is undefined; use rmse)",
              in.rows[r.index_min()]);
      return r;
    }
    case AdviseMetric::Centred: {
      arma::mat C = nr.Y;
      C.each_row() -= v;
      const double rms = std::sqrt(mean_of(arma::square(C)));
      require(rms > 0, "metric centred: every sampled output row equals V's mean row (nothing varies to measure)");
      return one * rms;
    }
    default:
      return one * std::sqrt(mean_sq);
  }
}

ExactAttention exact_rows(const Inputs& in) {
  if (in.positions.is_empty()) return exact_attention(in.Qa.cols(in.rows), in.Ka, in.V);
  return causal_rows(in, in.positions);
}

std::vector<std::pair<arma::uword, arma::uword>> position_bands(arma::uword L) {
  std::vector<std::pair<arma::uword, arma::uword>> b;
  for (arma::uword lo = 0, hi = 16; lo < L; lo = hi, hi *= 4) b.emplace_back(lo, std::min(hi, L));
  return b;
}

bool applicable(const Family& f, AdviceRow& row) {
  if (f.kind == Kind::Learned || !f.exact_variance) {
    row.status = "not applicable";
    row.reason = "no exact variance (a learned map or an estimator without log_var_over_k2)";
    return false;
  }
  return true;
}

}  // namespace kestrel::advise_steps

namespace kestrel {

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& e : EnumNames<AdviseMetric>::names) v.emplace_back(e.name);
    return v;
  }();
  return n;
}

arma::mat unit_scaled_values(const arma::mat& V) {
  const double m = V.is_empty() ? 0 : arma::abs(V).max();
  if (!(m > 0) || !std::isfinite(m)) return V;
  return V * std::ldexp(1.0, -std::ilogb(m));
}

}  // namespace kestrel
