// Bipolar hybrid random features (HRF section 2.2-2.4, eq. 8, 12, 19, 20, appendix F), their exact MSE
// (Lemma 2.2, Thm 3.1, Lemma 3.2, Thm D.1, Thm F.1) and the relative-error results (Lemma 3.4, Thm 3.5):
//   S_hyb(x,y) = lambda_hat(x,y) S_pos(x,y) + (1 - lambda_hat(x,y)) S_trig(x,y),
// S_pos the "hyperbolic" PosRF of eq. (3) (features exp(+-w^T x - |x|^2/2)/sqrt(2m)), S_trig the TrigRF
// cos(w^T (x - y)) e^{(|x|^2+|y|^2)/2} (eq. 2), lambda_hat independent of both:
//   angular  (eq. 19, D.1): lambda_hat = 1/2 - (1/2n) sum_k sgn(t_k^T x) sgn(t_k^T y), E = theta/pi;
//   gaussian (App. F, eq. 67-70): lambda_hat = 1/rho - (1/(n rho)) sum_k cos(sigma t_k^T (x - y)),
//            E = (1 - exp(-sigma^2 |x-y|^2 / 2)) / rho, rho = 1 - exp(-2 sigma^2 r^2) (eq. 68).
// Meaning of M (the Estimator's feature count) for a hybrid: m = M projections for EACH base estimator
// (shared between the two when shared_projections, Thm 3.1 variant II) and n = lambda_features lambda
// projections (n = M when lambda_features = 0). A draw holds the columns [w_pos (m) | w_trig (m, absent
// if shared) | t (n)]. The hybrid is not an average of M iid features, so log_var_over_k2_m is exact at
// every M and log_var_over_k2 is its M = 1 value (m = 1, and n = 1 when lambda_features = 0).
// Features (Lemma 2.3): with lambda_hat = a + c rho(x)^T rho(y),
//   S_hyb = a S_pos + (1-a) S_trig + c (rho (x) phi_pos)^T(...) - c (rho (x) phi_trig)^T(...),
// each block scaled by sqrt|coef| and the key side by sign(coef): 4m(n+1) columns (angular),
// 4m(2n+1) (gaussian). All features are real.
#pragma once
#include <memory>

#include "core/enum_names.hpp"
#include "estimators/estimator.hpp"

namespace kestrel {

// ---- Closed forms (free functions; lengths are norms, angles in [0, pi]) -------------------------

// Lemma 2.2 (eq. 7), absolute MSE at m features, logs: f1(|z|^2) f3(|D|^2) and f2(|z|^2) f3(|z|^2) with
// z = x + y, D = x - y, f1(u) = e^u SM^-2 / 2m, f2(u) = e^u SM^2 / 2m, f3(u) = (1 - e^-u)^2.
double lemma22_log_mse_trig(const arma::vec& x, const arma::vec& y, arma::uword m);
double lemma22_log_mse_pos(const arma::vec& x, const arma::vec& y, arma::uword m);

// Moments of lambda_hat that Thm 3.1 needs: E[l^2], E[(1-l)^2], E[l(1-l)], each in closed form.
struct LambdaMoments {
  double l2 = 0, one_minus_l2 = 0, l_one_minus_l = 0;
};
// Lemma 3.2 (eq. 24, 44): t = theta/pi, E l^2 = t (t - t/n + 1/n), E(1-l)^2 = (1-t)(1-t+t/n),
// E l(1-l) = t (1-t)(1-1/n).
LambdaMoments angular_lambda_moments(double theta, arma::uword n);
// Thm F.1 (eq. 72-73) with dist2 = |x - y|^2; E l(1-l) = E l - E l^2.
LambdaMoments gaussian_lambda_moments(double dist2, double sigma, double rho, arma::uword n);

// Thm 3.1 (eq. 22-23) relative to K^2 = SM^2 at m base features:
//   MSE/K^2 = [E l^2 (cosh|x+y|^2 - 1) + E(1-l)^2 (cosh|x-y|^2 - 1)
//              - 2 shared (1 - cos(|x|^2 - |y|^2)) E l(1-l)] / m
// (Lemma 2.2: MSE_pos/SM^2 = (cosh|z|^2 - 1)/m, MSE_trig/SM^2 = (cosh|D|^2 - 1)/m). Log; -inf if exact.
double bipolar_log_mse_over_k2(const LambdaMoments& lm, double sum2, double diff2, double norm_diff, arma::uword m,
                               bool shared);

// Lemma 3.4 (eq. 25): relative error of TrigRF at angle theta on the sphere S(r), m features;
// PosRF's is the same at pi - theta.
double lemma34_rel_error_trig(double theta, double r, arma::uword m);
// W(r) = exp(2r^2)(1 - exp(-4r^2)). The max relative error of TrigRF / PosRF on S(r) is W(r)/sqrt(2m)
// (eq. 25 at theta = pi); eq. (26) prints sqrt(W(r)/2m), a misprint.
double hrf_W(double r);
double lemma34_max_rel_error(double r, arma::uword m);
// Exact relative error of the angular hybrid on S(r) at angle theta (eq. 47-48, either variant: equal
// lengths make the shared-projection term vanish): exp(r^2) sqrt(h_r(theta) / 2m).
double angular_hybrid_rel_error(double theta, double r, arma::uword m, arma::uword n);
// Thm 3.5 bound for r >= 1. printed = true: eq. (65) (= eq. 27 with W instead of sqrt W),
//   W(r)/(r sqrt(2m)) sqrt(1/pi - 1/(n pi) + 1/(n sqrt(pi))).
// printed = false: the bound the proof actually gives once eq. (64) is corrected (max b2 <=
// exp(2r^2) / (2 n sqrt(pi) r), not / r^2): W(r)/sqrt(2m) sqrt((1 - 1/n)/(pi r^2) + 1/(n sqrt(pi) r)).
double thm35_bound(double r, arma::uword m, arma::uword n, bool printed = true);
// Thm 3.5's limit: eps_theta / sqrt(theta) -> W(r) / sqrt(2 pi m n) as theta -> 0 (and with pi - theta
// as theta -> pi); the paper prints sqrt(W(r) / (2 pi m n)).
double thm35_limit_coefficient(double r, arma::uword m, arma::uword n);

// ---- Estimators ------------------------------------------------------------------------------------

// Hyperbolic PosRF (HRF eq. 3): features exp(+-w^T x - |x|^2/2)/sqrt(2M), 2M real columns per M
// projections; one projection (a +-w pair) counts as one feature. Var/K^2 = cosh|x+y|^2 - 1 (Lemma 2.2).
class PosHypEstimator final : public Estimator {
 public:
  explicit PosHypEstimator(arma::uword d);
  nlohmann::json params() const override { return {{"family", "pos-hyp"}}; }
  nlohmann::json state() const override { return {{"family", info_.name}, {"d", d_}}; }

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;
};

enum class LambdaKind { Angular, Gaussian };
template <>
struct EnumNames<LambdaKind> {
  static constexpr std::string_view what = "lambda";
  static constexpr std::array<EnumName<LambdaKind>, 2> names{
      {{LambdaKind::Angular, "angular"}, {LambdaKind::Gaussian, "gaussian"}}};
};

struct HybridParams {
  LambdaKind lambda = LambdaKind::Angular;
  arma::uword lambda_features = 0;  // n; 0 means n = M
  bool shared_projections = false;  // Thm 3.1 variant II: S_pos and S_trig use the same w
  double sigma = 1.0;               // gaussian: bandwidth (eq. 67), > 0
  double rho = 1.0;                 // gaussian: normaliser (eq. 68), > 0; make_hrf_gauss fits it
};
void validate(const HybridParams& p);

class HybridEstimator final : public Estimator {
 public:
  HybridEstimator(std::string name, arma::uword d, HybridParams p);
  const HybridParams& hybrid_params() const { return p_; }
  nlohmann::json params() const override;
  nlohmann::json state() const override;

  // The same estimate computed directly as Lambda % S_pos + (1 - Lambda) % S_trig (softmax kernel),
  // for checking Lemma 2.3 (features(Query) features(Key)^T equals this).
  arma::mat direct_estimate(const Draw& w, const arma::mat& X, const arma::mat& Y) const;
  // The lambda estimate alone (Lx x Ly) and its exact moments at n lambda features.
  arma::mat lambda_estimate(const Draw& w, const arma::mat& X, const arma::mat& Y) const;
  LambdaMoments lambda_moments(const arma::vec& x, const arma::vec& y, arma::uword n) const;
  arma::uword lambda_count(arma::uword M) const { return p_.lambda_features == 0 ? M : p_.lambda_features; }

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;  // M = 1
  arma::mat log_var_m_hook(const PairGram& g, arma::uword M) const override;
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;
  Draw nested_draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;  // Undefined: ~M^2 columns
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  struct Layout {
    arma::uword m, n;
    arma::mat w_pos, w_trig, tau;
  };
  Layout split(const Draw& w) const;
  arma::mat lambda_features(const arma::mat& tau, const arma::mat& X) const;  // rho(x), L x n or L x 2n
  double lambda_offset() const;                                               // a
  double lambda_coef() const;                                                 // c

  HybridParams p_;
};

// Factories used by the registry.
std::unique_ptr<Estimator> make_pos_hyp(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_hrf_angular(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_pos_hyp(const nlohmann::json& state);
std::unique_ptr<Estimator> restore_hybrid(const nlohmann::json& state);  // hrf-angular, hrf-gauss
// sigma = 1, rho = 1 - exp(-2 sigma^2 r^2) with r^2 = (mean |x|^2 + mean |y|^2) / 2 (eq. 68 on the
// sphere of the mean squared length; lambda may leave [0, 1] off that sphere, the hybrid stays unbiased).
std::unique_ptr<Estimator> make_hrf_gauss(const arma::mat& X, const arma::mat& Y);
// At a fixed budget of M real feature columns (HRF Fig. 3 / Table 4, FLOP-matched): m = M/8 projections per base
// estimator and n = 8 lambda projections, 4m(n+1) = 4.5M columns (angular), 4m(2n+1) = 8.5M (Gaussian).
inline constexpr arma::uword kBudgetLambdaFeatures = 8;
arma::uword hybrid_draws_for_columns(arma::uword M);  // m = M/8
std::unique_ptr<Estimator> make_hrf_angular_for_budget(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> make_hrf_gauss_for_budget(const arma::mat& X, const arma::mat& Y);

}  // namespace kestrel
