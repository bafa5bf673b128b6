// Exact and random-feature softmax attention (CRT eq. 3); see attention.hpp.
#include "tasks/attention.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "estimators/registry.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

void validate_attention(const arma::mat& Q, const arma::mat& K, const arma::mat& V) {
  validate_points(Q, "queries");
  validate_points(K, "keys");
  require(Q.n_rows == K.n_rows, "queries and keys must have the same dimension, got {} and {}", Q.n_rows, K.n_rows);
  require(V.n_rows == K.n_cols, "values must have one row per key ({}), got {}", K.n_cols, V.n_rows);
  require(V.n_cols > 0, "values: dimension must be > 0, got 0");
  require(V.is_finite(), "values must be finite (found NaN or Inf)");
}

arma::mat attention_scaled(const arma::mat& X) { return X / std::pow(static_cast<double>(X.n_rows), 0.25); }

ExactAttention exact_attention(const arma::mat& Q, const arma::mat& K, const arma::mat& V, arma::uword block) {
  validate_attention(Q, K, V);
  require(block > 0, "block size must be > 0, got 0");
  const arma::mat Qs = attention_scaled(Q), Ks = attention_scaled(K);
  const arma::uword Lq = Q.n_cols, Lk = K.n_cols, dv = V.n_cols;
  ExactAttention out{arma::mat(Lq, dv), arma::vec(Lq)};
  for_each_block((Lq + block - 1) / block, [&](std::size_t b) {
    const arma::uword i0 = b * block, i1 = std::min(i0 + block, Lq) - 1, n = i1 - i0 + 1;
    const arma::mat Qb = Qs.cols(i0, i1);
    arma::vec m(n, arma::fill::value(-kInf)), s(n, arma::fill::zeros);
    arma::mat acc(n, dv, arma::fill::zeros);
    for (arma::uword j0 = 0; j0 < Lk; j0 += block) {
      const arma::uword j1 = std::min(j0 + block, Lk) - 1;
      arma::mat Z = Qb.t() * Ks.cols(j0, j1);  // logits of this tile
      const arma::vec m_new = arma::max(m, simd::row_max(Z));
      const arma::vec shrink = arma::exp(m - m_new);  // rescales the sums of earlier tiles (0 at the first)
      Z.each_col() -= m_new;
      simd::exp_libm(Z);  // std::exp's bits, as arma::exp
      s = s % shrink + arma::sum(Z, 1);
      acc.each_col() %= shrink;
      acc += Z * V.rows(j0, j1);
      m = m_new;
    }
    acc.each_col() /= s;
    out.Y.rows(i0, i1) = acc;
    out.log_normaliser.subvec(i0, i1) = m + arma::log(s);
  });
  return out;
}

std::unique_ptr<Estimator> fit_attention_estimator(const std::string& name, const arma::mat& Q, const arma::mat& K) {
  validate_sets(Q, K);
  return make_estimator(name, attention_scaled(Q), attention_scaled(K));
}

namespace {

// One draw's query and key features (Lq x M', Lk x M') with the stabiliser's row scales (attention.hpp).
struct Features {
  arma::mat P, S;
  arma::vec log_scale;
};

Features features_of(const FeatureMap& e, const Draw& w, const arma::mat& Q, const arma::mat& K,
                     const AttentionOptions& opt) {
  require(Q.n_rows == e.dim(), "queries have dimension {}, estimator '{}' was fitted for {}", Q.n_rows, e.info().name,
          e.dim());
  const arma::mat Qs = attention_scaled(Q), Ks = attention_scaled(K);
  Features f;
  if (opt.stabilise && e.info().positive) {
    f.P = e.log_features(w, Qs, Side::Query);
    const arma::vec row_max = simd::row_max(f.P);
    f.P.each_col() -= row_max;
    simd::exp_libm(f.P);  // std::exp's bits, as arma::exp, 8 at a time
    f.S = e.log_features(w, Ks, Side::Key);
    const double key_max = simd::row_max(f.S).max();
    f.S -= key_max;
    simd::exp_libm(f.S);
    f.log_scale = row_max + key_max;
  } else {
    f.P = e.features(w, Qs, Side::Query);
    f.S = e.features(w, Ks, Side::Key);
    f.log_scale.zeros(Q.n_cols);
  }
  return f;
}

// Y = numerator ./ normaliser, after checking that every normaliser is finite and non-zero.
ApproxAttention finish(const FeatureMap& e, ApproxAttention out, const AttentionOptions& opt) {
  for (arma::uword i = 0; i < out.normaliser.n_elem; ++i)
    if (!(std::isfinite(out.normaliser(i)) && out.normaliser(i) != 0 && std::isfinite(out.log_scale(i))))
      throw NumericalError(fmt::format("attention with '{}'{}: normaliser of query {} is {} (log scale {})",
                                       e.info().name, opt.stabilise ? "" : " (unstabilised)", i, out.normaliser(i),
                                       out.log_scale(i)));
  out.Y = out.numerator;
  out.Y.each_col() /= out.normaliser;
  if (!out.Y.is_finite()) throw NumericalError(fmt::format("attention with '{}': non-finite output", e.info().name));
  return out;
}

void validate_positions(const arma::mat& Q, const arma::uvec& positions, const arma::mat& K) {
  require(positions.n_elem == Q.n_cols, "causal attention: {} positions for {} queries", positions.n_elem, Q.n_cols);
  require(positions.is_empty() || positions.max() < K.n_cols,
          "causal attention: position {} is beyond the {} keys (positions count from 0)",
          positions.is_empty() ? 0 : positions.max(), K.n_cols);
}

}  // namespace

ApproxAttention approximate_attention(const FeatureMap& e, const Draw& w, const arma::mat& Q, const arma::mat& K,
                                      const arma::mat& V, const AttentionOptions& opt) {
  validate_attention(Q, K, V);
  const Features f = features_of(e, w, Q, K, opt);
  ApproxAttention out;
  out.log_scale = f.log_scale;
  out.numerator = f.P * (f.S.t() * V);
  out.normaliser = f.P * arma::sum(f.S, 0).t();
  return finish(e, std::move(out), opt);
}

ExactAttention exact_causal_attention(const arma::mat& Q, const arma::uvec& positions, const arma::mat& K,
                                      const arma::mat& V) {
  validate_attention(Q, K, V);
  validate_positions(Q, positions, K);
  ExactAttention out{arma::mat(Q.n_cols, V.n_cols), arma::vec(Q.n_cols)};
  for_each_block(Q.n_cols, [&](std::size_t r) {
    const arma::uword p = positions(r);
    const ExactAttention a = exact_attention(Q.col(r), K.cols(0, p), V.rows(0, p));
    out.Y.row(r) = a.Y;
    out.log_normaliser(r) = a.log_normaliser(0);
  });
  return out;
}

ApproxAttention approximate_causal_attention(const FeatureMap& e, const Draw& w, const arma::mat& Q,
                                             const arma::uvec& positions, const arma::mat& K, const arma::mat& V,
                                             const AttentionOptions& opt) {
  validate_attention(Q, K, V);
  validate_positions(Q, positions, K);
  const Features f = features_of(e, w, Q, K, opt);
  ApproxAttention out;
  out.log_scale = f.log_scale;
  out.numerator.set_size(Q.n_cols, V.n_cols);
  out.normaliser.set_size(Q.n_cols);
  // The prefix sums S[0..p]^T [V, 1], grown in order of position: each key is added once.
  arma::mat state(f.S.n_cols, V.n_cols, arma::fill::zeros);
  arma::rowvec total(f.S.n_cols, arma::fill::zeros);
  arma::uword next = 0;  // keys 0..next-1 are in the state
  for (const arma::uword r : arma::uvec(arma::stable_sort_index(positions))) {
    const arma::uword p = positions(r);
    if (p >= next) {
      state += f.S.rows(next, p).t() * V.rows(next, p);
      total += arma::sum(f.S.rows(next, p), 0);
      next = p + 1;
    }
    out.numerator.row(r) = f.P.row(r) * state;
    out.normaliser(r) = arma::dot(f.P.row(r), total);
  }
  return finish(e, std::move(out), opt);
}

double relative_error(const arma::mat& approx, const arma::mat& exact) {
  require(approx.n_rows == exact.n_rows && approx.n_cols == exact.n_cols, "sizes differ: {} x {} and {} x {}",
          approx.n_rows, approx.n_cols, exact.n_rows, exact.n_cols);
  return arma::norm(approx - exact, "fro") / arma::norm(exact, "fro");
}

double normaliser_relative_error(const ApproxAttention& approx, const ExactAttention& exact) {
  require(approx.normaliser.n_elem == exact.log_normaliser.n_elem, "{} estimated normalisers for {} exact ones",
          approx.normaliser.n_elem, exact.log_normaliser.n_elem);
  const double c = exact.log_normaliser.max();
  const arma::vec d = arma::exp(exact.log_normaliser - c);
  // sign * exp(log|n| + log_scale - c): the scale alone may be far larger than the normaliser.
  const arma::vec d_hat =
      arma::sign(approx.normaliser) % arma::exp(arma::log(arma::abs(approx.normaliser)) + approx.log_scale - c);
  return arma::norm(d_hat - d) / arma::norm(d);
}

}  // namespace kestrel
