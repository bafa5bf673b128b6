// Bipolar hybrid random features and their exact MSE (HRF eq. 3, 8, 12, 19, 20, Lemma 2.2-3.4,
// Thm 3.1, 3.5, appendix C, D, F); see hybrid.hpp.
#include "estimators/hrf/hybrid.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "estimators/state.hpp"

namespace kestrel {

namespace {

double safe_log(double v) { return v > 0 ? std::log(v) : -kInf; }

// Angle between x and y, accurate near 0 and pi: 2 atan2(|u - v|, |u + v|) for unit u, v.
double angle(const arma::vec& x, const arma::vec& y) {
  const arma::vec u = x / arma::norm(x), v = y / arma::norm(y);
  return 2.0 * std::atan2(arma::norm(u - v), arma::norm(u + v));
}

// Row-wise Kronecker product: row i of the result is kron(R.row(i), F.row(i)).
arma::mat row_kron(const arma::mat& R, const arma::mat& F) {
  arma::mat out(R.n_rows, R.n_cols * F.n_cols);
  for (arma::uword r = 0; r < R.n_cols; ++r) {
    arma::mat block = F;
    block.each_col() %= R.col(r);
    out.cols(r * F.n_cols, (r + 1) * F.n_cols - 1) = block;
  }
  return out;
}

// The logs of pos_hyp_features: [w^T x, -w^T x] - |x|^2 / 2 - log(2) / 2 (each of a pair weighs 1/2).
arma::mat pos_hyp_exponent(const arma::mat& w, const arma::mat& X) {
  const arma::mat proj = X.t() * w;
  const arma::colvec shift = -0.5 * arma::sum(arma::square(X), 0).t();
  const double log_scale = -0.5 * M_LN2;
  arma::mat P = proj, N = -proj;
  P.each_col() += shift;
  N.each_col() += shift;
  return arma::join_rows(P, N) + log_scale;
}

arma::mat pos_hyp_features(const arma::mat& w, const arma::mat& X) {
  arma::mat F = pos_hyp_exponent(w, X);
  return simd::exp_libm(F);  // std::exp's bits, as arma::exp, 8 at a time
}

arma::mat trig_features(const arma::mat& w, const arma::mat& X) {
  const arma::mat proj = X.t() * w;
  arma::mat F = arma::join_rows(arma::cos(proj), arma::sin(proj));
  F.each_col() %= arma::exp(0.5 * arma::sum(arma::square(X), 0).t());
  return F;
}

}  // namespace

// ---- Closed forms ---------------------------------------------------------------------------------

double lemma22_log_mse_trig(const arma::vec& x, const arma::vec& y, arma::uword m) {
  require(m > 0 && x.n_elem == y.n_elem, "Lemma 2.2 needs m > 0 and equal dimensions");
  const double z2 = arma::accu(arma::square(x + y)), d2 = arma::accu(arma::square(x - y));
  return -std::log(2.0 * m) + z2 - 2 * arma::dot(x, y) + 2 * log1mexp(-d2);
}

double lemma22_log_mse_pos(const arma::vec& x, const arma::vec& y, arma::uword m) {
  require(m > 0 && x.n_elem == y.n_elem, "Lemma 2.2 needs m > 0 and equal dimensions");
  const double z2 = arma::accu(arma::square(x + y));
  return -std::log(2.0 * m) + z2 + 2 * arma::dot(x, y) + 2 * log1mexp(-z2);
}

LambdaMoments angular_lambda_moments(double theta, arma::uword n) {
  require(n > 0, "number of lambda features n must be > 0, got 0");
  require(theta >= 0 && theta <= M_PI, "angle must be in [0, pi], got {}", theta);
  const double t = theta / M_PI, nn = static_cast<double>(n);
  return {t * (t - t / nn + 1 / nn), (1 - t) * (1 - t + t / nn), t * (1 - t) * (1 - 1 / nn)};
}

LambdaMoments gaussian_lambda_moments(double dist2, double sigma, double rho, arma::uword n) {
  require(n > 0, "number of lambda features n must be > 0, got 0");
  require(sigma > 0 && rho > 0 && std::isfinite(sigma) && std::isfinite(rho) && dist2 >= 0,
          "gaussian lambda needs sigma > 0, rho > 0, |x-y|^2 >= 0, got {}, {}, {}", sigma, rho, dist2);
  const double s2 = sigma * sigma, nn = static_cast<double>(n);
  const double e1 = std::exp(-0.5 * s2 * dist2), om1 = -std::expm1(-0.5 * s2 * dist2), om2 = -std::expm1(-s2 * dist2);
  const double noise = om2 * om2 / (2 * nn * rho * rho);  // Var(lambda_hat)
  const double l2 = om1 * om1 / (rho * rho) + noise;      // eq. (72)
  const double q = (1 - rho) - e1;
  const double oml2 = q * q / (rho * rho) + noise;  // eq. (73)
  return {l2, oml2, om1 / rho - l2};
}

double bipolar_log_mse_over_k2(const LambdaMoments& lm, double sum2, double diff2, double norm_diff, arma::uword m,
                               bool shared) {
  require(m > 0, "number of features M must be > 0, got 0");
  SignedLog v;
  if (lm.l2 > 0) v = v + SignedLog::from_log(std::log(lm.l2) + log_cosh_minus_one(sum2));
  if (lm.one_minus_l2 > 0) v = v + SignedLog::from_log(std::log(lm.one_minus_l2) + log_cosh_minus_one(diff2));
  const double s = std::sin(0.5 * norm_diff);
  if (shared && lm.l_one_minus_l != 0 && s != 0)  // -2 (1 - cos D) E l(1-l) = -4 sin^2(D/2) E l(1-l)
    v = v + SignedLog::from_log(std::log(4.0) + 2 * std::log(std::abs(s)) + std::log(std::abs(lm.l_one_minus_l)),
                                lm.l_one_minus_l > 0 ? -1 : 1);
  return v.sign > 0 ? v.log_abs - std::log(static_cast<double>(m)) : -kInf;
}

double lemma34_rel_error_trig(double theta, double r, arma::uword m) {
  require(m > 0 && r >= 0 && theta >= 0 && theta <= M_PI, "Lemma 3.4 needs m > 0, r >= 0, theta in [0, pi]");
  const double s2 = std::pow(std::sin(0.5 * theta), 2);
  return std::exp(2 * r * r * s2) * -std::expm1(-4 * r * r * s2) / std::sqrt(2.0 * m);
}

double hrf_W(double r) { return std::exp(2 * r * r) * -std::expm1(-4 * r * r); }

double lemma34_max_rel_error(double r, arma::uword m) {
  require(m > 0 && r >= 0, "Lemma 3.4 needs m > 0 and r >= 0");
  return hrf_W(r) / std::sqrt(2.0 * m);
}

double angular_hybrid_rel_error(double theta, double r, arma::uword m, arma::uword n) {
  require(m > 0 && n > 0 && r >= 0 && theta >= 0 && theta <= M_PI, "needs m, n > 0, r >= 0, theta in [0, pi]");
  const double nn = static_cast<double>(n), r2 = r * r;
  // a_r(theta) of eq. (50), in logs.
  auto log_a = [&](double th) {
    const double t = th / M_PI;
    const double c2 = std::pow(std::cos(0.5 * th), 2);
    return safe_log(t * (t - t / nn + 1 / nn)) + 2 * r2 * std::cos(th) + 2 * safe_log(-std::expm1(-4 * r2 * c2));
  };
  const double log_h = log_add_exp(log_a(theta), log_a(M_PI - theta));
  return std::exp(r2 + 0.5 * (log_h - std::log(2.0 * m)));
}

double thm35_bound(double r, arma::uword m, arma::uword n, bool printed) {
  require(m > 0 && n > 0 && r >= 1, "Thm 3.5 needs m, n > 0 and r >= 1, got m = {}, n = {}, r = {}", m, n, r);
  const double nn = static_cast<double>(n), W = hrf_W(r) / std::sqrt(2.0 * m);
  if (printed) return W / r * std::sqrt(1 / M_PI - 1 / (nn * M_PI) + 1 / (nn * std::sqrt(M_PI)));
  return W * std::sqrt((1 - 1 / nn) / (M_PI * r * r) + 1 / (nn * std::sqrt(M_PI) * r));
}

double thm35_limit_coefficient(double r, arma::uword m, arma::uword n) {
  require(m > 0 && n > 0, "needs m, n > 0");
  return hrf_W(r) / std::sqrt(2 * M_PI * m * n);
}

// ---- Hyperbolic PosRF ------------------------------------------------------------------------------

PosHypEstimator::PosHypEstimator(arma::uword d) {
  require(d > 0, "dimension d must be > 0, got 0");
  d_ = d;
  info_.name = "pos-hyp";
  info_.positive = true;
  info_.blocks_per_draw = 2;  // [e^{w x}, e^{-w x}]
}

arma::mat PosHypEstimator::log_var_hook(const PairGram& g) const {
  arma::mat S = pairwise_sq_norm_sum(g, 1.0);
  S.transform([](double v) { return log_cosh_minus_one(v); });
  return S;
}

arma::mat PosHypEstimator::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                         bool log) const {
  return from_exponent(pos_hyp_exponent(w.omega, X), log_row_scale, log);  // the row scale inside the exponent
}

// pos_hyp_features' pieces: P = [w, -w], col = -log(2)/2, row = -|x|^2 / 2.
std::optional<FeatureMap::Exponent> PosHypEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side) const {
  Exponent e;
  if (w) {
    e.form = {arma::join_rows(w->omega, -w->omega), arma::rowvec(2 * w->count(), arma::fill::value(-0.5 * M_LN2))};
  }
  if (X) e.points = {*X, -0.5 * arma::sum(arma::square(*X), 0).t()};
  return e;
}

// ---- Hybrid ----------------------------------------------------------------------------------------

void validate(const HybridParams& p) {
  if (p.lambda == LambdaKind::Gaussian)
    require(p.sigma > 0 && std::isfinite(p.sigma) && p.rho > 0 && std::isfinite(p.rho),
            "gaussian hybrid needs finite sigma > 0 and rho > 0, got sigma = {}, rho = {}", p.sigma, p.rho);
}

HybridEstimator::HybridEstimator(std::string name, arma::uword d, HybridParams p) : p_(p) {
  require(d > 0, "dimension d must be > 0, got 0");
  d_ = d;
  validate(p_);
  info_.name = std::move(name);
  info_.blocks_per_draw = 0;  // every base feature paired with every lambda feature
}

double HybridEstimator::lambda_offset() const { return p_.lambda == LambdaKind::Angular ? 0.5 : 1.0 / p_.rho; }
double HybridEstimator::lambda_coef() const { return p_.lambda == LambdaKind::Angular ? -0.5 : -1.0 / p_.rho; }

LambdaMoments HybridEstimator::lambda_moments(const arma::vec& x, const arma::vec& y, arma::uword n) const {
  if (p_.lambda == LambdaKind::Gaussian)
    return gaussian_lambda_moments(arma::accu(arma::square(x - y)), p_.sigma, p_.rho, n);
  // sgn(t^T 0) = 0: lambda_hat = 1/2 exactly when x or y is 0.
  if (!arma::any(x != 0.0) || !arma::any(y != 0.0)) return {0.25, 0.25, 0.25};
  return angular_lambda_moments(angle(x, y), n);
}

arma::mat HybridEstimator::log_var_hook(const PairGram& g) const { return log_var_m_hook(g, 1); }

namespace {

// The angular hybrid's log(MSE/K^2) for the pairs (x_i, y) of one column (Thm 3.1 with Lemma 3.2): what
// bipolar_log_mse_over_k2(angular_lambda_moments(theta_i, n_lambda), ...) gives pair by pair, with the transcendentals
// over arrays (simd::, libmvec, <= 4 ulp each; issue #19: pair by pair they were two thirds of the time), so equal to
// it to rounding (test HrfThm31.AngularArrayFormMatchesThePerPairForm). Inputs, n each: sum2 = |x_i + y|^2, diff2 =
// |x_i - y|^2, um2 = |u_i - v|^2 and up2 = |u_i + v|^2 of the unit vectors (theta = 2 atan2(|u - v|, |u + v|), accurate
// near 0 and pi), zero_x: x_i = 0; nx: |x_i|^2, ny: |y|^2.
void angular_column(arma::uword n, const double* sum2, const double* diff2, const double* um2, const double* up2,
                    const std::vector<char>& zero_x, bool zero_y, const arma::rowvec& nx, double ny,
                    arma::uword n_lambda, arma::uword M, bool shared, double* out) {
  const double nn = static_cast<double>(n_lambda);
  arma::vec A(sum2, n), B(diff2, n), C(n), T(n), U(n);
  for (arma::uword i = 0; i < n; ++i) {
    T(i) = std::sqrt(um2[i]);
    U(i) = std::sqrt(up2[i]);
  }
  simd::atan2(T.memptr(), U.memptr(), n);  // theta / 2
  simd::log_cosh_minus_one(A.memptr(), n);
  simd::log_cosh_minus_one(B.memptr(), n);
  arma::vec L2(n), O2(n);
  for (arma::uword i = 0; i < n; ++i) {  // Lemma 3.2's moments, t = theta / pi; a point at 0 has lambda_hat = 1/2
    const bool half = zero_x[i] || zero_y;
    const double t = 2.0 * T(i) / M_PI;
    L2(i) = half ? 0.25 : t * (t - t / nn + 1 / nn);
    O2(i) = half ? 0.25 : (1 - t) * (1 - t + t / nn);
    C(i) = half ? 0.25 : t * (1 - t) * (1 - 1 / nn);  // E l(1-l) >= 0
    U(i) = 0.5 * (nx(i) - ny);
  }
  simd::log(L2.memptr(), n);  // -inf where a moment is 0: that term is absent
  simd::log(O2.memptr(), n);
  A += L2;
  B += O2;
  // V = log(e^A + e^B), as SignedLog adds two positive terms (an absent one, -inf, adds exp(-inf) = 0).
  for (arma::uword i = 0; i < n; ++i) {
    const double hi = std::max(A(i), B(i));
    T(i) = hi == -kInf ? -kInf : std::min(A(i), B(i)) - hi;
    A(i) = hi;
  }
  simd::exp(T.memptr(), n);
  simd::log1p(T.memptr(), n);
  A += T;  // V
  const double log_m = std::log(static_cast<double>(M));
  if (!shared) {
    for (arma::uword i = 0; i < n; ++i) out[i] = A(i) == -kInf ? -kInf : A(i) - log_m;
    return;
  }
  // The shared-projection term -log(4 sin^2(D/2) E l(1-l)), D = |x|^2 - |y|^2: V minus it as log_sub_exp, and
  // -inf when it is not smaller than V (the MSE rounds to <= 0).
  simd::sin(U.memptr(), n);
  U = arma::abs(U);
  simd::log(U.memptr(), n);
  simd::log(C.memptr(), n);
  C += std::log(4.0) + 2 * U;  // -inf: absent
  arma::vec E1(n), E2(n);
  for (arma::uword i = 0; i < n; ++i) E1(i) = E2(i) = C(i) == -kInf || !(C(i) < A(i)) ? -1.0 : C(i) - A(i);
  simd::expm1(E1.memptr(), n);
  simd::exp(E2.memptr(), n);
  E1 = -E1;
  E2 = -E2;
  simd::log(E1.memptr(), n);    // log(-expm1(x)), for x > -ln 2
  simd::log1p(E2.memptr(), n);  // log1p(-exp(x)), otherwise
  for (arma::uword i = 0; i < n; ++i) {
    if (C(i) == -kInf) {
      out[i] = A(i) == -kInf ? -kInf : A(i) - log_m;
    } else if (!(C(i) < A(i))) {
      out[i] = -kInf;
    } else {
      const double x = C(i) - A(i);
      out[i] = A(i) + (x > -M_LN2 ? E1(i) : E2(i)) - log_m;
    }
  }
}

}  // namespace

arma::mat HybridEstimator::log_var_m_hook(const PairGram& g, arma::uword M) const {
  const arma::mat &X = g.X, &Y = g.Y;
  const arma::uword n = lambda_count(M);
  const arma::rowvec nx = arma::sum(arma::square(X), 0), ny = arma::sum(arma::square(Y), 0);
  // Angular lambda: the unit vectors x/|x| of each set once instead of once per pair, and the pairs of a column as
  // arrays (angular_column; issue #19).
  const bool angular = p_.lambda == LambdaKind::Angular;
  arma::mat UX, UY;
  std::vector<char> zero_x, zero_y;
  if (angular) {
    const auto unit_columns = [](const arma::mat& A, arma::mat& U, std::vector<char>& zero) {
      U.zeros(A.n_rows, A.n_cols);  // a zero point keeps a zero column
      zero.assign(A.n_cols, 0);
      for (arma::uword k = 0; k < A.n_cols; ++k) {
        const arma::vec a(const_cast<double*>(A.colptr(k)), A.n_rows, false, true);
        zero[k] = !arma::any(a != 0.0);
        if (!zero[k]) U.col(k) = a / arma::norm(a);
      }
    };
    unit_columns(X, UX, zero_x);
    unit_columns(Y, UY, zero_y);
  }
  arma::mat out(X.n_cols, Y.n_cols);
  if (angular) {  // the four pairwise sums of squares by Gram products, cancelling entries recomputed directly
    const arma::mat S2 = pairwise_sq_norm_sum(g, 1.0), D2 = pairwise_sq_norm_sum(g, -1.0);
    const PairGram gu(UX, UY);
    const arma::mat UM = pairwise_sq_norm_sum(gu, -1.0), UP = pairwise_sq_norm_sum(gu, 1.0);
    for_each_block(Y.n_cols, [&](std::size_t j) {
      angular_column(X.n_cols, S2.colptr(j), D2.colptr(j), UM.colptr(j), UP.colptr(j), zero_x, zero_y[j], nx, ny(j), n,
                     M, p_.shared_projections, out.colptr(j));
    });
    return out;
  }
  for_each_block(Y.n_cols, [&](std::size_t j) {
    // Aliases of the columns, not copies (a Col over the matrix memory: same expression types as before).
    const arma::vec y(const_cast<double*>(Y.colptr(j)), d_, false, true);
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      const arma::vec x(const_cast<double*>(X.colptr(i)), d_, false, true);
      const double sum2 = arma::accu(arma::square(x + y)), diff2 = arma::accu(arma::square(x - y));
      const LambdaMoments lm = lambda_moments(x, y, n);
      out(i, j) = bipolar_log_mse_over_k2(lm, sum2, diff2, nx(i) - ny(j), M, p_.shared_projections);
    }
  });
  return out;
}

Draw HybridEstimator::draw_hook(arma::uword M, Rng& rng, Sampler sampler) const {
  Draw w;
  w.omega = draw_gaussian_omegas(d_, M, sampler, rng);
  if (!p_.shared_projections) w.omega_trig = draw_gaussian_omegas(d_, M, sampler, rng);
  w.tau = draw_gaussian_omegas(d_, lambda_count(M), sampler, rng);
  return w;
}

Draw HybridEstimator::nested_draw_hook(arma::uword, Rng&, Sampler) const {
  throw Undefined(
      fmt::format("'{}' is a hybrid: its features pair every base feature with every lambda feature "
                  "(~M^2 columns), so its draws do not nest",
                  info_.name));
}

HybridEstimator::Layout HybridEstimator::split(const Draw& w) const {
  require(w.omega.n_rows == d_, "draw has dimension {}, estimator expects {}", w.omega.n_rows, d_);
  const arma::uword m = w.omega.n_cols, n = w.tau.n_cols;
  require(m > 0 && n > 0 && w.tau.n_rows == d_ && n == (p_.lambda_features ? p_.lambda_features : m),
          "draw with {} projections and {} lambda projections does not match hybrid '{}' (a hybrid's draw holds omega, "
          "tau{})",
          m, n, info_.name, p_.shared_projections ? "" : " and omega_trig");
  require(p_.shared_projections ? w.omega_trig.is_empty() : w.omega_trig.n_rows == d_ && w.omega_trig.n_cols == m,
          "draw with {} trigonometric projections does not match hybrid '{}' ({} expected)", w.omega_trig.n_cols,
          info_.name, p_.shared_projections ? 0 : m);
  Layout l;
  l.m = w.omega.n_cols;
  l.n = w.tau.n_cols;
  l.w_pos = w.omega;
  l.w_trig = p_.shared_projections ? w.omega : w.omega_trig;
  l.tau = w.tau;
  return l;
}

arma::mat HybridEstimator::lambda_features(const arma::mat& tau, const arma::mat& X) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(tau.n_cols));
  const arma::mat proj = X.t() * tau;
  if (p_.lambda == LambdaKind::Angular) return arma::sign(proj) * scale;
  return arma::join_rows(arma::cos(p_.sigma * proj), arma::sin(p_.sigma * proj)) * scale;
}

arma::mat HybridEstimator::features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                                         bool log) const {
  const Layout l = split(w);
  const arma::mat fp = pos_hyp_features(l.w_pos, X), ft = trig_features(l.w_trig, X);
  const arma::mat rho = lambda_features(l.tau, X);
  const double a = lambda_offset(), c = lambda_coef();
  const bool key = side == Side::Key;
  auto scaled = [&](const arma::mat& F, double coef) {
    const double s = std::sqrt(std::abs(coef));
    return arma::mat(F * ((key && coef < 0) ? -s : s));
  };
  return apply_row_scale(arma::join_rows(arma::join_rows(scaled(fp, a), scaled(ft, 1 - a)),
                                         arma::join_rows(scaled(row_kron(rho, fp), c), scaled(row_kron(rho, ft), -c))),
                         log_row_scale, log);
}

arma::mat HybridEstimator::lambda_estimate(const Draw& w, const arma::mat& X, const arma::mat& Y) const {
  const Layout l = split(w);
  return lambda_offset() + lambda_coef() * lambda_features(l.tau, X) * lambda_features(l.tau, Y).t();
}

arma::mat HybridEstimator::direct_estimate(const Draw& w, const arma::mat& X, const arma::mat& Y) const {
  validate_pair(X, Y, d_);
  const Layout l = split(w);
  const arma::mat Spos = pos_hyp_features(l.w_pos, X) * pos_hyp_features(l.w_pos, Y).t();
  const arma::mat Strig = trig_features(l.w_trig, X) * trig_features(l.w_trig, Y).t();
  const arma::mat L = lambda_estimate(w, X, Y);
  return (L % Spos + (1.0 - L) % Strig) / static_cast<double>(l.m);  // the average over the m projections
}

nlohmann::json HybridEstimator::params() const {
  nlohmann::json j = {{"family", "hrf"},
                      {"lambda", name_of(p_.lambda)},
                      {"lambda_features", p_.lambda_features},
                      {"shared_projections", p_.shared_projections}};
  if (p_.lambda == LambdaKind::Gaussian) j["sigma"] = p_.sigma, j["rho"] = p_.rho;
  return j;
}

nlohmann::json HybridEstimator::state() const {
  return {{"family", info_.name},
          {"d", d_},
          {"lambda", name_of(p_.lambda)},
          {"lambda_features", p_.lambda_features},
          {"shared_projections", p_.shared_projections},
          {"sigma", p_.sigma},
          {"rho", p_.rho}};
}

std::unique_ptr<Estimator> restore_hybrid(const nlohmann::json& j) {
  const std::string lambda = j.value("lambda", "");
  const std::optional<LambdaKind> kind = find_enum<LambdaKind>(lambda);
  require(kind.has_value(), "estimator state field 'lambda' must be {}", enum_choices<LambdaKind>());
  require(j.contains("shared_projections") && j["shared_projections"].is_boolean(),
          "estimator state has no boolean field 'shared_projections'");
  const HybridParams p{.lambda = *kind,
                       .lambda_features = state::count(j, "lambda_features"),
                       .shared_projections = j["shared_projections"].get<bool>(),
                       .sigma = state::num(j, "sigma"),
                       .rho = state::num(j, "rho")};
  return std::make_unique<HybridEstimator>(j["family"].get<std::string>(), state::count(j, "d"), p);
}

std::unique_ptr<Estimator> restore_pos_hyp(const nlohmann::json& j) {
  return std::make_unique<PosHypEstimator>(state::count(j, "d"));
}

std::unique_ptr<Estimator> make_pos_hyp(const arma::mat& X, const arma::mat&) {
  return std::make_unique<PosHypEstimator>(X.n_rows);
}

namespace {
// sigma = 1, rho = 1 - exp(-2 sigma^2 r^2) on the sphere of the mean squared length (see hybrid.hpp).
HybridParams gauss_params(const arma::mat& X, const arma::mat& Y) {
  validate_points(X, "X");
  validate_points(Y, "Y");
  HybridParams p{.lambda = LambdaKind::Gaussian};
  const double r2 = 0.5 * (arma::accu(arma::square(X)) / X.n_cols + arma::accu(arma::square(Y)) / Y.n_cols);
  p.rho = r2 > 0 ? -std::expm1(-2 * p.sigma * p.sigma * r2) : 1.0;  // all-zero sets: lambda = 0 exactly
  return p;
}

HybridParams at_budget(HybridParams p) {
  p.lambda_features = kBudgetLambdaFeatures;
  return p;
}
}  // namespace

std::unique_ptr<Estimator> make_hrf_angular(const arma::mat& X, const arma::mat&) {
  return std::make_unique<HybridEstimator>("hrf-angular", X.n_rows, HybridParams{});
}

std::unique_ptr<Estimator> make_hrf_gauss(const arma::mat& X, const arma::mat& Y) {
  return std::make_unique<HybridEstimator>("hrf-gauss", X.n_rows, gauss_params(X, Y));
}

arma::uword hybrid_draws_for_columns(arma::uword M) { return M / 8; }

std::unique_ptr<Estimator> make_hrf_angular_for_budget(const arma::mat& X, const arma::mat&) {
  return std::make_unique<HybridEstimator>("hrf-angular", X.n_rows, at_budget(HybridParams{}));
}

std::unique_ptr<Estimator> make_hrf_gauss_for_budget(const arma::mat& X, const arma::mat& Y) {
  return std::make_unique<HybridEstimator>("hrf-gauss", X.n_rows, at_budget(gauss_params(X, Y)));
}

}  // namespace kestrel
