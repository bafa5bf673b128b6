// Attention-row error: delta-method prediction and its simulation (attention_variance.hpp).
#include "analysis/attention_variance.hpp"

#include <cmath>

#include "analysis/operator_variance.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"

namespace kestrel {

namespace {

SignedLog times(SignedLog s, double v) {
  if (v == 0 || s.sign == 0) return {};
  return {s.log_abs + std::log(std::abs(v)), v > 0 ? s.sign : -s.sign};
}

double sq(double v) { return v * v; }

}  // namespace

AttentionPrediction predict_attention_error(const ThreePointForm& form, bool positive, const Kernel& k,
                                            const arma::mat& X, const arma::mat& Y, const arma::mat& V, arma::uword M,
                                            const arma::uvec& rows) {
  require(V.n_cols > 0, "V must have at least one column");
  const RatioMoments m = ratio_moments(form, k, X, Y, V, M, rows);
  const arma::uword dv = V.n_cols, Lx = m.log_trace.n_elem;
  auto cov_d = [&](arma::uword i, arma::uword a) { return SignedLog::from_log(m.log_abs_cov(i, a), m.sign_cov(i, a)); };
  AttentionPrediction p;
  p.log_mse.set_size(Lx);
  p.log_norm_y.set_size(Lx);
  p.log_bias.set_size(Lx);
  p.log_rel_var.set_size(Lx);
  p.p_nonpositive_bound.zeros(Lx);
  p.outside.zeros(Lx);
  p.log_mse_bound.set_size(Lx);
  p.log_mse_bound.fill(kInf);
  p.Y.set_size(Lx, dv);
  const arma::rowvec v_max = arma::max(V, 0), v_min = arma::min(V, 0);
  for (arma::uword i = 0; i < Lx; ++i) {
    const double log_d = m.log_abs_kc(i, dv);  // D = (K 1)_i > 0
    const SignedLog var_d = cov_d(i, dv);
    double norm2 = 0, bias2 = 0;
    SignedLog mse = SignedLog::from_log(m.log_trace(i));
    for (arma::uword a = 0; a < dv; ++a) {
      const double y = m.sign_kc(i, a) * std::exp(m.log_abs_kc(i, a) - log_d);
      p.Y(i, a) = y;
      norm2 += y * y;
      mse = mse + times(cov_d(i, a), -2 * y) + times(var_d, y * y);
      const SignedLog b = times(var_d, y) + times(cov_d(i, a), -1.0);
      if (b.sign) bias2 += std::exp(2 * (b.log_abs - 2 * log_d));
    }
    p.log_mse(i) = mse.sign > 0 ? mse.log_abs - 2 * log_d : -kInf;  // below 0 only by rounding: exact
    p.log_norm_y(i) = 0.5 * std::log(norm2);
    p.log_bias(i) = 0.5 * std::log(bias2);
    p.log_rel_var(i) = var_d.sign > 0 ? var_d.log_abs - 2 * log_d : -kInf;
    const double r = std::exp(p.log_rel_var(i));
    if (positive) {
      double bound = 0;
      // max_j (V_ja - y)^2 is at V's column max or min (rounding is monotone, so the same number): O(dv) per row.
      for (arma::uword a = 0; a < dv; ++a) bound += std::max(sq(v_max[a] - p.Y(i, a)), sq(v_min[a] - p.Y(i, a)));
      p.log_mse_bound(i) = std::log(bound);
    }
    p.outside(i) = r > kDeltaMethodMaxRelVar || p.log_mse(i) > p.log_mse_bound(i);
    if (!positive) p.p_nonpositive_bound(i) = std::isinf(r) ? 1.0 : r / (1 + r);
  }
  return p;
}

AttentionMeasurement simulate_attention(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                        const arma::mat& V, const MonteCarloOptions& opt) {
  require(V.n_rows == Y.n_cols && V.n_cols > 0, "V must be Ly x dv with Ly = {} keys, got {} x {}", Y.n_cols, V.n_rows,
          V.n_cols);
  require(opt.reps >= 2, "the attention simulation needs at least 2 repetitions, got {}", opt.reps);
  const arma::mat C = arma::join_rows(V, arma::ones(V.n_rows));
  const arma::mat NC = kernel_times(k, X, Y, C);
  auto ratio = [&](const arma::mat& est) {
    arma::mat out = est.head_cols(V.n_cols);
    out.each_col() /= est.col(V.n_cols);
    return out;
  };
  const arma::mat Yx = ratio(NC);
  constexpr std::size_t kChunks = 16;  // fixed: independent of the thread count
  const std::size_t n_chunks = std::min(kChunks, opt.reps);
  std::vector<arma::vec> s1(n_chunks), s2(n_chunks);
  std::vector<arma::uvec> neg(n_chunks);
  for_each_block(n_chunks, [&](std::size_t c) {
    s1[c].zeros(X.n_cols);
    s2[c].zeros(X.n_cols);
    neg[c].zeros(X.n_cols);
    for (std::size_t r = opt.reps * c / n_chunks; r < opt.reps * (c + 1) / n_chunks; ++r) {
      Rng rng(opt.seed, Stream::MonteCarlo, r);
      const Draw w = e.draw(opt.features, rng, opt.sampler);
      const arma::mat P = feature_map(e, w, X, Side::Query, k), S = feature_map(e, w, Y, Side::Key, k);
      const arma::mat est = P * (S.t() * C);
      const arma::vec err = arma::sum(arma::square(ratio(est) - Yx), 1);
      s1[c] += err;
      s2[c] += arma::square(err);
      neg[c] += arma::conv_to<arma::uvec>::from(est.col(V.n_cols) <= 0);
    }
  });
  AttentionMeasurement out;
  out.reps = opt.reps;
  arma::vec t1 = s1[0], t2 = s2[0];
  out.nonpositive = neg[0];
  for (std::size_t c = 1; c < n_chunks; ++c) t1 += s1[c], t2 += s2[c], out.nonpositive += neg[c];
  const double R = static_cast<double>(opt.reps);
  out.mse = t1 / R;
  out.se_mse = arma::sqrt(arma::clamp(t2 / R - arma::square(out.mse), 0, arma::datum::inf) / (R - 1));
  if (!out.mse.is_finite())
    throw NumericalError(
        fmt::format("estimator '{}': attention simulation overflowed or divided by a zero "
                    "normaliser (non-finite error)",
                    e.info().name));
  return out;
}

}  // namespace kestrel
