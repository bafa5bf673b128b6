// LUNA: learned kernel feature maps (LUNA section 3.2 eq. 11; ablation variants of section 5.4) next to the
// random-feature families. phi(x) = g(x) P^-1/2 [psi_c(w_p^T x + b_p)]_{p,c} with M = P C features; the kernel
// k(x, y) = phi(x)^T phi(y) is positive definite by construction (a Gram matrix of explicit features).
// A learned map is deterministic: it has no random draw, zero variance and a bias. As a FeatureMap (not an
// Estimator: there is no variance to report; use luna_relative_mse) it accepts the empty Draw of draw(M) (M must
// equal its P C), so feature_map, approximate_kernel(_times), classification and attention code work unchanged.
#pragma once
#include <memory>
#include <string>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "estimators/estimator.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

// LUNA 5.4's variants. FixedRff: frozen random W, psi = (cos, sin) (C = 2), nothing learned (an RFF draw of the
// Gaussian kernel). BankCoef: learned W, b and channel coefficients A over a frozen sinusoidal bank (an
// input-agnostic reweighting of the basis). Gated: everything learned, with the token-wise envelope g(x).
// Ungated: everything learned, g = 1 (LUNA's default).
enum class LunaVariant { FixedRff, BankCoef, Gated, Ungated };
template <>
struct EnumNames<LunaVariant> {
  static constexpr std::string_view what = "LUNA variant";
  static constexpr std::array<EnumName<LunaVariant>, 4> names{{{LunaVariant::FixedRff, "fixed-rff"},
                                                               {LunaVariant::BankCoef, "bank-coef"},
                                                               {LunaVariant::Gated, "gated"},
                                                               {LunaVariant::Ungated, "ungated"}}};
};
inline std::string to_string(LunaVariant v) { return name_of(v); }
inline LunaVariant parse_luna_variant(const std::string& name) { return parse_enum<LunaVariant>(name); }

struct LunaParams {
  LunaVariant variant = LunaVariant::Ungated;
  double target_alpha = -0.5;  // the map approximates K^(target_alpha); -1/2: Gaussian kernel
  arma::mat W;                 // P x d projections w_p^T
  arma::vec b;                 // P offsets
  arma::vec u, v;              // h bank frequencies and phases: bank unit k is sin(u_k z + v_k)
  arma::mat A;                 // C x h channel coefficients
  arma::vec gate_w;            // d: linear part of log g(x) (Gated only)
  double gate_gamma = 0;       // quadratic part of log g(x) = gate_w^T x + gate_gamma |x|^2 (Gated only)
  arma::uword P() const { return W.n_rows; }
  arma::uword d() const { return W.n_cols; }
  arma::uword C() const { return A.n_rows; }
  arma::uword h() const { return A.n_cols; }
  arma::uword M() const { return P() * C(); }
};

struct LunaInitOptions {
  arma::uword channels = 4;  // C of the learned variants (FixedRff always has C = 2)
  double target_alpha = -0.5;
  std::uint64_t seed = 1;  // W is drawn from Rng(seed, Stream::Fit, 0)
};

// The starting point of training, an exact random Fourier feature map of the Gaussian kernel: rows of W ~ N(0, I),
// b = 0, h = C bank units sin(z + k pi / C) and A = sqrt(2/C) I, so phi(x)^T phi(y) = (1/P) sum_p cos(w_p^T(x-y)).
// M must be a multiple of C (of 2 for FixedRff). Throws InvalidArgument naming the bad value.
LunaParams luna_init(LunaVariant variant, arma::uword d, arma::uword M, const LunaInitOptions& opt = {});

// Checks shapes and finiteness; throws InvalidArgument naming the problem.
void validate(const LunaParams& p);

// phi(x_i) for the columns of X (d x L): L x M.
arma::mat luna_features(const LunaParams& p, const arma::mat& X);

// Mean over all pairs (i, j) of ((phi(x_i)^T phi(y_j) - K(x_i, y_j)) / K(x_i, y_j))^2, K = K^(target_alpha): the
// relative MSE of a deterministic map (its squared relative bias). The ratio uses e^-log K, so it never forms K;
// throws NumericalError if the result is not finite.
double luna_relative_mse(const LunaParams& p, const arma::mat& X, const arma::mat& Y);

// Exact round trip: every number is written with 17 significant digits.
nlohmann::json to_json(const LunaParams& p);
LunaParams luna_params_from_json(const nlohmann::json& j);

// The HDF5 file of a map (save_luna, load_luna) is in io/luna_file.hpp, one layer up: estimators do not include io/.

// A learned map is a FeatureMap, not an Estimator: it is deterministic, its variance is zero and its error is a
// bias (luna_relative_mse), so it has no Var/K^2 to report.
class LunaMap final : public FeatureMap {
 public:
  explicit LunaMap(LunaParams p);
  nlohmann::json params() const override { return to_json(p_); }
  const LunaParams& map() const { return p_; }

 protected:
  // An empty Draw (d x 0): nothing is random (the base checks that M is the map's P C).
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;
  // Softmax-kernel features phi(x) exp(-target_alpha |x|^2 + log_row_scale), so that feature_map under the kernel
  // the map was trained for returns phi(x) itself (the two exponents cancel exactly). NumericalError if the
  // row factor overflows.
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  LunaParams p_;
};

// The registry's learned families: the map before training (luna_init, M = 16); `kestrel reproduce luna` trains.
inline constexpr arma::uword kLunaInitialFeatures = 16;
std::unique_ptr<FeatureMap> make_luna_initial(LunaVariant v, arma::uword d);

}  // namespace kestrel
