// The queries and keys of the attention studies (experiments/attention and attention-variance): isotropic Gaussian
// at sigma 0.5 and 1, anisotropic (geometric spectrum, condition 100), and centred MNIST / CIFAR-10 patches scaled to
// a fixed lambda_max of the pooled second moment of the d^-1/4-scaled points.
#pragma once
#include <string>
#include <vector>

#include <armadillo>

#include "data/regimes.hpp"
#include "experiment.hpp"

namespace kestrel::experiments {

struct AttentionInput {
  std::string name, regime;
  double sigma;  // after the image scaling
  Preprocess preprocess = Preprocess::Raw;
  std::string spectrum;   // aniso: the spectrum; "-" otherwise
  double lambda_max = 0;  // of the scaled pooled second moment at the nominal sigma
  arma::mat Q, K;         // d x L queries and keys (unscaled: attention_scaled gives the kernel's points)
};

// The five inputs at d x L, drawn from opt.seed (set pair 0).
std::vector<AttentionInput> attention_inputs(const Options& opt, arma::uword d, arma::uword L);

}  // namespace kestrel::experiments
