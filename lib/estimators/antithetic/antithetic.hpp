// PosRF with antithetic pairs (family "pos-anti", the guide's example of a family: docs/own-estimator.md): the positive
// features of CRT 2.2 / FAVOR+,
//   f(w,x) = exp(w^T x - |x|^2/2) / sqrt(M), estimating the softmax kernel K(x,y) = exp(x^T y),
// drawn as pairs (w, -w), w ~ N(0, I_d), so that the odd part of exp(w^T (x+y)) cancels within a pair.
//
// M is the number of feature columns, as for every other family (so pos and pos-anti compare at equal cost):
// a draw of M features holds P = floor(M/2) Gaussian omegas, their P negatives, and for odd M one more
// unpaired omega (M = 1 is plain PosRF). The pairs are not independent features, so the M-feature variance is
// not the one-feature variance over M (log_var_m_hook is overridden).
//
// Exact variance, with S = |x + y|^2 and a = |x|^2 + |y|^2, f(w) = exp(w^T (x+y) - a/2):
//   K = E f = exp(S/2 - a/2),  E f^2 = exp(2S - a),  E f(w) f(-w) = exp(-a)   (E e^{w^T u} = e^{|u|^2/2}),
//   one pair (f(w) + f(-w))/2:  Var_pair = (E f^2 + E f(w) f(-w))/2 - K^2,  Var_pair / K^2 = cosh S - 1,
//   one unpaired feature:       Var_1 / K^2 = e^S - 1 (PosRF),
//   M = 2P + r (r = 0, 1):      Var / K^2 = (4P (cosh S - 1) + r (e^S - 1)) / M^2
//                               (= 2 (cosh S - 1) / M for even M: Var_pair over M/2 iid pairs).
// cosh S - 1 <= e^S - 1 always, ~ S^2/2 against S for small S: antithetic pairs help most at small |x + y|.
// Only S enters, so the ratio (like PosRF's) is the same for every scaled softmax kernel K^(alpha).
// Confirmed by Monte Carlo: the contract suite (tests/contract_test.cpp, M = 1 and 3) and, for even M, the
// simulator through `kestrel variance --mc` (see the branch's report).
// With the orthogonal/structured/Halton samplers the P paired omegas come from the sampler; the exact variance
// above is the iid one, as for every family.
#pragma once
#include <memory>

#include "estimators/estimator.hpp"

namespace kestrel {

// log(Var/K^2) of the M-feature estimate at S = |x + y|^2 >= 0 (M > 0); -inf at S = 0, where every feature equals
// exp(-a/2) and the estimate is exact.
double pos_anti_log_var_over_k2(double S, arma::uword M);

class PosAntiEstimator final : public Estimator {
 public:
  explicit PosAntiEstimator(arma::uword d);
  nlohmann::json params() const override;
  nlohmann::json state() const override;

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;  // M = 1: PosRF
  arma::mat log_var_m_hook(const PairGram& g, arma::uword M) const override;
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;         // [W, -W, (w)]
  Draw nested_draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;  // [w1, -w1, w2, -w2, ...]
  std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const override;
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;
};

// Registry factory: nothing to fit.
std::unique_ptr<Estimator> make_pos_anti(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_pos_anti(const nlohmann::json& state);

}  // namespace kestrel
