// The list of reproductions: adding one is a folder under experiments/ and one line here.
#include "experiment.hpp"

namespace kestrel::experiments {

void run_crt_fig1(const Options&, H5Writer&, std::vector<Claim>&);
void run_crt_fig2(const Options&, H5Writer&, std::vector<Claim>&);
void run_derf_fig2(const Options&, H5Writer&, std::vector<Claim>&);
void run_orf(const Options&, H5Writer&, std::vector<Claim>&);

const std::vector<Experiment>& all_experiments() {
  static const std::vector<Experiment> list = {
      {"crt-fig1", "CRT Fig. 1 right: log(Var OPRF / Var PosRF) vs |x+y|^2", run_crt_fig1},
      {"crt-fig2", "CRT Fig. 2: log-variance of the CRT estimators in four regimes", run_crt_fig2},
      {"derf-fig2", "DERF Fig. 2: log relative variance of DERF-family estimators in six regimes", run_derf_fig2},
      {"orf", "CRT Thm 4.1: orthogonal vs iid projections across d", run_orf},
  };
  return list;
}

}  // namespace kestrel::experiments
