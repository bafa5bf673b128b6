// Real trigonometric random features (RKS cos form, DERF eq. 4-5) for the softmax kernel:
//   f1(w,x) = sqrt(2) e^{|x|^2/2} cos(w^T x + theta),  f2(w,y) = sqrt(2) e^{|y|^2/2} cos(w^T y + theta),
//   w ~ N(0, I_d), theta ~ U[0, 2 pi).
// DERF eq. 5 prints f2 with cos(-w^T y + theta); that estimates exp(-x^T y), not the softmax kernel
// (E cos(w^T(x+y)) appears instead of E cos(w^T(x-y))). The sign is fixed here and tested.
// Exact variance: Var/K^2 = e^S + e^{-S}/2 - 1 with S = |x - y|^2 (derived in trig_real.cpp).
#pragma once
#include <memory>

#include "estimators/estimator.hpp"
#include "estimators/three_point.hpp"

namespace kestrel {

double trig_real_log_var_over_k2(double S);

// The three-point form (three_point.hpp): averaging over the phase, cos^2(a) cos(b) cos(c) keeps the exponentials
// whose phase multiples cancel, E_theta = [2 cos(2a - b - c) + 4 cos(b - c)] / 16, so
//   E[f1^2 f2_j f2_k] = e^{|x|^2 + (|y_j|^2 + |y_k|^2)/2} (e^{-|2x - y_j - y_k|^2/2} / 2 + e^{-|y_j - y_k|^2/2}):
// TrigRF's holomorphic term (cx = -1, cxy = 1, cy = 0, cyy = -1) with weight 1/2 and its Hermitian one (cx = 1,
// cxy = -1, cy = 0, cyy = 1) with weight 1. On the diagonal: e^{-S}/2 + e^S, S = |x - y|^2, as above.
ThreePointForm trig_real_three_point_form();

class TrigRealEstimator final : public Estimator {
 public:
  explicit TrigRealEstimator(arma::uword d);
  nlohmann::json params() const override { return {{"family", "trig-real"}}; }
  nlohmann::json state() const override { return {{"family", info_.name}, {"d", d_}}; }

 protected:
  arma::mat log_var_hook(const PairGram& g) const override;
  std::optional<ThreePointForm> three_point_form_hook() const override { return trig_real_three_point_form(); }
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;  // projections and phases
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;
};

std::unique_ptr<Estimator> make_trig_real(const arma::mat& X, const arma::mat& Y);
std::unique_ptr<Estimator> restore_trig_real(const nlohmann::json& state);

}  // namespace kestrel
