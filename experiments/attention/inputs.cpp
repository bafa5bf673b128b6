// The attention studies' inputs (inputs.hpp).
#include "inputs.hpp"

#include <cmath>

#include "estimators/dark/dark.hpp"
#include "tasks/attention.hpp"

namespace kestrel::experiments {

std::vector<AttentionInput> attention_inputs(const Options& opt, arma::uword d, arma::uword L) {
  // aniso: mean eigenvalue 1 as iso-1, condition 100, sigma 0.5 so that lambda_max of the scaled
  // second moment is 0.14 < 1/2 (DARK's Sigma* exists) and < 1/6 (PosRF's expected variance is finite,
  // DARK Thm 3.2 / dark.hpp). Images: centred pixels, scaled so that lambda_max of the scaled pooled
  // second moment is kImageLambda (sigma records the factor): comparable difficulty for both data sets, and DARK's
  // Sigma* exists.
  std::vector<AttentionInput> inputs = {{"iso-0.5", "normal", 0.5},
                                        {"iso-1", "normal", 1.0},
                                        {"aniso", "aniso", 0.5},
                                        {"mnist", "mnist", 1.0, Preprocess::Center},
                                        {"cifar10", "cifar10", 1.0, Preprocess::Center}};
  constexpr double kImageLambda = 0.25;
  for (auto& in : inputs) {
    RegimeOptions ro = opt.regime_options;
    ro.preprocess = in.preprocess;
    ro.spectrum = "geometric:100";
    in.spectrum = in.regime == "aniso" ? ro.spectrum : std::string("-");
    SetPair sp =
        draw_regime({.name = in.regime, .dim = d, .points = L, .sigma = in.sigma, .seed = opt.seed, .options = ro});
    in.lambda_max = arma::eig_sym(pooled_second_moment(attention_scaled(sp.X), attention_scaled(sp.Y))).max();
    if (in.preprocess != Preprocess::Raw) {
      const double f = std::sqrt(kImageLambda / in.lambda_max);
      in.sigma *= f, sp.X *= f, sp.Y *= f;
    }
    in.Q = std::move(sp.X), in.K = std::move(sp.Y);
  }
  return inputs;
}

}  // namespace kestrel::experiments
