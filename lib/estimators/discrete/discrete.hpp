// Discretely-induced random features (CRT section 3.2, eq. 9-14, Thm 3.4-3.5) in softmax form:
//   f(w,x) = prod_l x_l^{w_l} (w_l!)^{-1/2} p_{w_l}^{-1/2},  w_l iid with P(w_l = k) = p_k,
// so that E f(w,x) f(w,y) = prod_l sum_k (x_l y_l)^k / k! = exp(x^T y) (CRT eq. 9-10 without the
// Gaussian factor exp(-|x|^2/2), which kestrel applies through the kernel's alpha). PoisRF: p_k Poisson(lambda);
// GeomRF: p_k = p (1-p)^k. PoisRF+ / GeomRF+ (CRT 3.2.3) apply the same features to shifted points.
#pragma once
#include <memory>
#include <optional>

#include "core/enum_names.hpp"
#include "estimators/estimator.hpp"

namespace kestrel {

enum class DiscreteKind { Poisson, Geometric };
template <>
struct EnumNames<DiscreteKind> {
  static constexpr std::string_view what = "kind";
  static constexpr std::array<EnumName<DiscreteKind>, 2> names{
      {{DiscreteKind::Poisson, "poisson"}, {DiscreteKind::Geometric, "geometric"}}};
};

struct DiscreteParams {
  DiscreteKind kind = DiscreteKind::Poisson;
  double lambda = 1.0;  // Poisson rate, > 0 (used when kind == Poisson)
  double p = 0.5;       // geometric success probability in (0, 1) (used when kind == Geometric)
};

// Throws unless lambda > 0 (Poisson) or 0 < p < 1 (geometric), finite.
void validate(const DiscreteParams& q);

// log P(w_l = k).
double discrete_log_pk(const DiscreteParams& q, unsigned k);

// log I0(z) without overflow: power series (Horner) for |z| < 6, z + log(I0_scaled(z)) (GSL) above.
double log_bessel_i0(double z);

// Per-coordinate log second-moment ratio h(t) = log(E[X_l^2 Y_l^2] / e^{2t}) with t = x_l y_l, so that
// Var(f(x) f(y)) / K^2 = exp(sum_l h(x_l y_l)) - 1 (coordinates of w are independent).
//   Poisson:   E[X^2 Y^2] = e^lambda exp(t^2/lambda) (CRT 9.5), h = (t - lambda)^2 / lambda. This is CRT eq. 11
//              divided by K^2, lambda d + sum t_l^2 / lambda - 2 x^T y, written as a sum of squares (no cancellation;
//              exact, h = 0, iff every x_l y_l = lambda).
//   Geometric: E[X^2 Y^2] = p^{-1} I0(2 |t| / sqrt(1-p)) (CRT 9.6), h = -log p + log I0(2|t|/sqrt(1-p)) - 2t.
// h >= 0 (a one-dimensional second moment is >= the squared mean); rounding below 0 is clamped to 0.
double discrete_coord_log_m2(const DiscreteParams& q, double t);

// log(Var/K^2) of one feature at one pair given H = sum_l h(x_l y_l): log(e^H - 1), -inf when H = 0.
double discrete_log_var_from_sum(double H);

// H(i, j) = sum_l h(x_il y_jl) for every pair of columns: the O(L^2 d) core of the pairwise variance (one BLAS product
// for PoisRF, a vectorised series for GeomRF; see discrete.cpp).
arma::mat discrete_pairwise_sums(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y);

// Statistics of a pair of sets for the parameter fits, in O(L d) (CRT eq. 12 and 14).
struct DiscreteStats {
  arma::uword d = 0;
  double mean_sum_sq_prod = 0;  // mean over all pairs of sum_l x_l^2 y_l^2 (eq. 12)
  arma::vec mean_abs_prod;      // a_l = mean over all pairs of |x_l y_l| (eq. 14), length d
  double mean_xy = 0;           // mean over all pairs of x^T y = xbar^T ybar
};
DiscreteStats discrete_stats(const arma::mat& X, const arma::mat& Y);

// Averaged objectives: log(E[f1^2 f2^2] / K^2) at the averaged statistics (CRT appendix 9.10.1).
// For PoisRF the log second moment is linear in the statistics, so this is exactly the mean over all pairs of
// log(1 + Var/K^2) = lambda d + S/lambda - 2 x^T y. For GeomRF: -d log p + sum_l log I0(2 a_l / sqrt(1-p)) - 2 xbar^T
// ybar (the homogeneity approximation of CRT 3.2.2).
double poisson_objective(double lambda, const DiscreteStats& st);
double geometric_objective(double p, const DiscreteStats& st);

// lambda* = d^{-1/2} S^{1/2} with S from eq. 12 (CRT 3.2.1). Throws InvalidArgument when S = 0 (every coordinate is
// zero in X or in Y: the objective decreases towards the invalid rate lambda = 0).
double poisson_lambda_star(const DiscreteStats& st);

struct GeometricFitOptions {
  int max_iter = 100;  // Brent iterations (CRT appendix 9.10.1)
};
// p minimising geometric_objective by Brent's method (boost brent_find_minima) over u = logit(p) in [-30, 30], so that
// p close to 0 or 1 is resolved in relative terms. The objective is convex in p (log I0 is convex and increasing, and
// 2a/sqrt(1-p) is convex), hence unimodal in u. Throws InvalidArgument when every a_l = 0 (as for lambda*).
double fit_geometric_p(const DiscreteStats& st, const GeometricFitOptions& opt = {});

// PoisRF+ / GeomRF+ shift (CRT 3.2.3, appendix 9.10.2): c_l = min over the fitting sets X and Y of coordinate l,
// minus epsilon. Points map to x_hat = max(x - c, epsilon), so new inputs below c are clamped.
struct ShiftParams {
  arma::vec c;
  double epsilon = 1e-8;
};
ShiftParams fit_shift(const arma::mat& X, const arma::mat& Y, double epsilon = 1e-8);
arma::mat shift_points(const ShiftParams& s, const arma::mat& X);

// The estimator. Without a shift: f as above (not positive; x_l = 0 is allowed, 0^0 = 1).
// With a shift (PoisRF+, GeomRF+): the Gaussian-kernel DIRF of CRT eq. 10 applied to x_hat and rescaled to the softmax
// kernel of the ORIGINAL point,
//   f+(w,x) = exp(|x|^2/2) exp(-|x_hat|^2/2) f(w, x_hat),
// so E f+(x) f+(y) = exp((|x|^2 + |y|^2 - |x_hat - y_hat|^2)/2) = exp(x^T y) because x_hat - y_hat = x - y (the
// Gaussian kernel is shift invariant, the softmax kernel is not). Var/K^2 is then the DIRF's ratio at (x_hat, y_hat).
// A clamped input (some x_l < c_l + epsilon, only possible for points outside the fitting sets) breaks
// x_hat - y_hat = x - y: the estimator is then BIASED, E f+ f+ = K exp((|x-y|^2 - |x_hat-y_hat|^2)/2), and
// log_var_over_k2 returns its exact variance over K^2: log(e^H - 1) + |x-y|^2 - |x_hat-y_hat|^2.
// The sampler argument of draw() is ignored: the counts w_l are iid, there is no orthogonal variant.
class DiscreteEstimator final : public Estimator {
 public:
  DiscreteEstimator(std::string name, arma::uword d, DiscreteParams q, std::optional<ShiftParams> shift = {});
  const DiscreteParams& discrete_params() const { return q_; }
  const std::optional<ShiftParams>& shift() const { return shift_; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;  // per-coordinate counts
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;
  // PoisRF+ / GeomRF+ only (all features positive): log f = (log x_hat)^T w + base_m + (|x|^2 - |x_hat|^2)/2.
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;

 private:
  arma::rowvec log_base(const Draw& w) const;  // sum_l -(log k_l! + log p_{k_l}) / 2 per draw column

  DiscreteParams q_;
  std::optional<ShiftParams> shift_;
};

// Factories used by the registry: fit lambda* / p (and the shift) on the pair of sets (X, Y).
std::unique_ptr<Estimator> make_pois(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_geom(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_discrete(const nlohmann::json& state);  // pois, geom, pois+, geom+
std::unique_ptr<Estimator> make_pois_plus(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_geom_plus(const arma::mat& X, const arma::mat& Y);
// The same with the shift fitted on the reference (key) set Y alone, for tasks whose queries come later.
std::unique_ptr<Estimator> make_pois_plus_from_reference(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_geom_plus_from_reference(const arma::mat& X, const arma::mat& Y);
// PoisRF+ / GeomRF+ with a given shift: lambda* / p are fitted on the shifted (and clamped) sets. The classification
// protocol (CRT 9.10.2) infers the shift from the training set only, so validation and test inputs are clamped.
std::unique_ptr<Estimator> make_discrete_plus(DiscreteKind kind, const arma::mat& X, const arma::mat& Y, ShiftParams s);

}  // namespace kestrel
