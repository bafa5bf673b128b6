// `kestrel reproduce advise` (advise.cpp): the inputs it checks `kestrel advise` on, and the check on a chosen subset
// of them (tests/advise_test.cpp runs a fast subset; the reproduction runs all).
#pragma once
#include <string>
#include <vector>

#include <armadillo>

#include "experiment.hpp"

namespace kestrel::experiments {

struct AdviseCase {
  std::string name, kind;
  arma::mat Q, K, V;  // d x L, d x L, L x dv
  arma::uword budget;
};

// The ten inputs at the run's sizes (quick or paper).
std::vector<AdviseCase> advise_cases(const Options& opt);

// The reproduction on `inputs`: per input the advise report, the independent measurements and the claims.
void run_advise_on(const std::vector<AdviseCase>& inputs, const Options& opt, H5Writer& h5, std::vector<Claim>& claims);

}  // namespace kestrel::experiments
