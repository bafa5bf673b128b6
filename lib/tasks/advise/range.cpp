// advise's numerical range: the natural-log exponents of one draw's features and of the key sums, per number format
// (fp32, bf16, fp16) without and with the stabiliser (FeatureRange in advise.hpp).
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "analysis/key_tiles.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"

namespace kestrel::advise_steps {

namespace {

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

// Maps with an exponent form (without groups) take it in single precision, on the simulation's key tiles
// (key_tiles.hpp): the projection by one product per tile of 1024 keys, exponents within ~1e-6 of their magnitude (the
// range is reported to 4 digits). Others: log_abs (the family's log-features in double) over tiles of 512 keys, which
// keeps a tile at M = 4096 below 32 MiB (no fresh pages).
template <typename LogAbs>
KeyRange key_range(const Estimator& e, const Draw& w, const arma::mat& K, const Kernel& k, LogAbs&& log_abs) {
  const std::optional<ExponentForm> form = e.info().positive ? e.exponent_form(w, Side::Key) : std::nullopt;
  const bool single = form && form->group.is_empty();
  const arma::uword tile = single ? kKeyTile : 512;
  std::vector<KeyTile> keys;
  arma::fmat P32;
  arma::rowvec col;
  if (single) {
    keys =
        key_tiles(e, K, {}, true, k.alpha != 0 ? arma::vec(k.alpha * arma::sum(arma::square(K), 0).t()) : arma::vec());
    P32 = arma::conv_to<arma::fmat>::from(form->P);
    col = form->col;
  }
  const arma::uword n_tiles = (K.n_cols + tile - 1) / tile;
  std::vector<KeyRange> tiles(n_tiles);
  for_each_block(n_tiles, [&](std::size_t t) {
    const arma::uword j0 = t * tile, j1 = std::min(K.n_cols, j0 + tile) - 1, n = j1 - j0 + 1;
    KeyRange& r = tiles[t];
    arma::fmat E;
    arma::mat S;
    if (single)
      E = keys[t].Y.t() * P32;
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
        const float ftop = simd::add_max(c, keys[t].row.memptr(), n);
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

}  // namespace

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
  auto log_abs = [&](const arma::mat& X, Side side) {
    return r.stabilisable ? e.raw_log_features(w, X, side, scale(X))
                          : arma::mat(arma::log(arma::abs(e.raw_features(w, X, side, scale(X)))));
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

}  // namespace kestrel::advise_steps

namespace kestrel {

const std::vector<NumberFormat>& number_formats() {
  // log of: largest finite, smallest normal, smallest subnormal.
  static const std::vector<NumberFormat> f{
      {"fp32", std::log(std::numeric_limits<float>::max()), std::log(std::numeric_limits<float>::min()),
       std::log(std::numeric_limits<float>::denorm_min())},
      {"bf16", std::log(3.3895313892515355e38), std::log(std::numeric_limits<float>::min()), std::log(9.1835e-41)},
      {"fp16", std::log(65504.0), std::log(6.103515625e-05), std::log(5.960464477539063e-08)}};
  return f;
}

}  // namespace kestrel
