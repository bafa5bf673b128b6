// Parameter sweeps (`kestrel sweep`): a variance study over the grid sigma x d x L x M for a set of
// estimators. Each grid point is computed independently (so results are identical for any thread
// count and any order) and saved atomically as it finishes in OUT.parts/, which makes an interrupted
// sweep resume without recomputing finished points; the HDF5 file is assembled (atomically) at the end.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/variance_study.hpp"

namespace kestrel {

struct SweepOptions {
  VarianceStudyOptions base;  // regime, pairs, seed, estimators, kernel, regime options, halve_real
  std::vector<double> sigmas = {0.5, 1.0};
  std::vector<arma::uword> dims = {64};
  std::vector<arma::uword> points = {1024};
  std::vector<arma::uword> features = {1};
  std::string out;                 // HDF5 path; parts go to out + ".parts/"
  std::size_t stop_after = 0;      // testing hook: stop (throw) after computing this many points; 0 = off
};

void validate(const SweepOptions& opt);
nlohmann::json to_json(const SweepOptions& opt);

struct SweepRow {
  std::string estimator;
  double sigma = 0;
  arma::uword dim = 0, points = 0, features = 0;
  nlohmann::json result;  // to_json(VarianceResult) of that grid point
};

struct SweepReport {
  std::vector<SweepRow> rows;
  std::size_t computed = 0, resumed = 0;
};

// Runs (or resumes) the sweep and writes opt.out; provenance goes into the file's root attributes.
SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress = {});

}  // namespace kestrel
