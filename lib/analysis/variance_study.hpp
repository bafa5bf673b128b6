// The variance study behind `kestrel variance` (CRT section 5.1, DERF section 5.1): for each sigma
// and each of `pairs` set pairs drawn from a regime, fit every estimator on the pair of sets and
// compute the exact variance for all L x L pairs; optionally confirm by Monte Carlo on a subset.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/pairwise.hpp"
#include "data/regimes.hpp"

namespace kestrel {

struct VarianceStudyOptions {
  std::string regime = "normal";
  std::vector<double> sigmas = {0.5, 1.0};
  arma::uword dim = 64;
  arma::uword points = 1024;  // L
  arma::uword pairs = 5;      // number of (X, Y) set pairs
  std::uint64_t seed = 1;
  std::vector<std::string> estimators = {"trig", "pos", "gerf", "oprf"};
  Kernel kernel = Kernel::softmax();
  arma::uword features = 1;    // M: reported variances are of the M-feature estimate (Var_1 / M for iid averages)
  std::size_t mc_reps = 0;     // > 0: also run the Monte Carlo simulator
  arma::uword mc_points = 64;  // Monte Carlo on the first mc_points points of each set
  Sampler sampler = Sampler::Iid;
  RegimeOptions regime_options;  // data directory, image preprocessing, spectrum, clusters, files
  // CRT appendix 9.10.1: a complex feature holds two real numbers, so for a fair comparison real-valued
  // families get twice the features (their variance is halved); the rule is per family, see
  // halved_by_halve_real in estimators/registry.hpp.
  bool halve_real = false;
};

void validate(const VarianceStudyOptions& opt);
nlohmann::json to_json(const VarianceStudyOptions& opt);

struct McSummary {
  RunningStats log_var_mc;     // log of the empirical variance (M features), entries with v > 0
  RunningStats log_var_exact;  // exact log variance (M features) on the same entries
  double max_abs_z_mean = 0;   // max |mean - K| / se over entries
  double frac_var_within_3se = 0;  // share of entries with |v_mc - v_exact| < 3 se(v_mc)
  std::uint64_t entries = 0;
};

struct VarianceResult {
  std::string estimator;
  arma::uword features = 1;  // M used for this estimator (2 M for real-valued families with halve_real)
  double sigma = 0;
  PairwiseSummary summary;               // pooled over all set pairs
  std::vector<PairwiseSummary> per_set;  // one per set pair
  nlohmann::json params = nlohmann::json::array();  // fitted parameters per set pair
  std::optional<McSummary> mc;
};

using Progress = std::function<void(const std::string&)>;
std::vector<VarianceResult> run_variance_study(const VarianceStudyOptions& opt, const Progress& progress = {});

class H5Writer;
// Writes results under `group` as group/<estimator>/<quantity>[sigma] (see README "Output files").
void write_h5(H5Writer& h5, const std::string& group, const std::vector<VarianceResult>& results,
              const VarianceStudyOptions& opt);

// One JSON object per (estimator, sigma) with the stable keys of `kestrel variance --json`.
nlohmann::json to_json(const VarianceResult& r, const VarianceStudyOptions& opt);

}  // namespace kestrel
