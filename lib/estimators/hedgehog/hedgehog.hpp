// Hedgehog's learned "spiky" feature map (Zhang et al. 2024, "The Hedgehog & the Porcupine", section 4.1; issue 65):
// phi(x) = [exp(W x + b), exp(-(W x + b))], M = 2P features from P learned projections (W: P x d, b: P), applied
// to the attention-scaled points x = q / d^(1/4), k / d^(1/4), so that phi(q')^T phi(k') stands in for exp(q^T k /
// sqrt(d)). One map serves queries and keys (the paper trains one per side; shared here: phi^T phi is a positive
// definite kernel). The fit to a head's softmax attention is in hedgehog/fit.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "estimators/estimator.hpp"

namespace kestrel {

struct HedgehogParams {
  arma::mat W;  // P x d projections, row p is w_p^T
  arma::vec b;  // P offsets
  arma::uword P() const { return W.n_rows; }
  arma::uword d() const { return W.n_cols; }
  arma::uword M() const { return 2 * W.n_rows; }
};

// The starting point of a fit: row p of W ~ N(0, I_d) from Rng(seed, Stream::Fit, p) (one stream per row, so the first
// P rows do not depend on M) and b = 0. This is antithetic positive random features without PosRF's exp(-|x|^2/2):
// E_w[phi(q)^T phi(k)] / M = exp(q^T k) exp(|q|^2/2) exp(|k|^2/2); the query factor cancels in the normalised
// attention, the key factor is a per-key weight the fit has to unlearn. M must be even and > 0.
HedgehogParams hedgehog_init(arma::uword d, arma::uword M, std::uint64_t seed);

// A warm start for a larger M (issue 65 item 5): p's rows and offsets, then rows P..M/2-1 as hedgehog_init(d, M, seed)
// draws them. M must be even and >= p.M().
HedgehogParams hedgehog_extend(const HedgehogParams& p, arma::uword M, std::uint64_t seed);

// Checks shapes (P > 0, d > 0, b of P) and finiteness; throws InvalidArgument naming the problem.
void validate(const HedgehogParams& p);

// log phi(x_i) for the columns of X (d x L, already attention-scaled): L x M, columns [W x + b, -(W x + b)].
arma::mat hedgehog_log_features(const HedgehogParams& p, const arma::mat& X);

// A named array for output files: values row-major (C order, as NumPy and PyTorch read them).
struct NamedArray {
  std::string name;
  std::vector<arma::uword> shape;
  std::vector<double> values;
};
// The map's parameters by name: "W" (P x d) and "b" (P).
std::vector<NamedArray> named_parameters(const HedgehogParams& p);

// Exact round trip (numbers with 17 significant digits): {"family": "hedgehog", "P", "d", "M", "W" rows, "b"}.
nlohmann::json to_json(const HedgehogParams& p);
HedgehogParams hedgehog_params_from_json(const nlohmann::json& j);

// A learned map is a FeatureMap, not an Estimator (as LunaMap): deterministic, no variance; draw(M) gives the empty
// Draw and M must be the map's 2P. Positive, with log-features, so approximate_attention (tasks/attention.hpp)
// stabilises it: the stabilised linear attention Y-hat = (P (S^T V)) ./ (P (S^T 1)) of a fitted map.
class HedgehogMap final : public FeatureMap {
 public:
  explicit HedgehogMap(HedgehogParams p);
  nlohmann::json params() const override { return to_json(p_); }
  const HedgehogParams& map() const { return p_; }

 protected:
  Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const override;
  arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                          bool log) const override;

 private:
  HedgehogParams p_;
};

}  // namespace kestrel
