// Parameter sweeps (`kestrel sweep`): a variance study over the grid sigma x d x L x M for a set of
// estimators. Each grid point is computed independently (so results are identical for any thread
// count and any order) and saved atomically as it finishes in OUT.parts/, which makes an interrupted
// sweep resume without recomputing finished points; the HDF5 file is assembled (atomically) at the end.
// The finished file keeps every grid point's results in /sweep/resume, so a sweep extended by grid values
// (same other options) computes only the new points.
// Across processes (MPI ranks, see SweepGroup) each rank computes a static share of the grid into the
// same OUT.parts/ and rank 0 assembles the file, identical to a one-process run.
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
  std::string out;             // HDF5 path; parts go to out + ".parts/"
  bool force = false;          // replace an existing out
  std::size_t stop_after = 0;  // testing hook: stop (throw) after computing this many points; 0 = off
  int stop_rank = -1;          // testing hook: only this rank stops (-1 = every rank)
  bool stop_killed = false;    // testing hook: stop by SIGKILL (a crash, e.g. the OOM killer), not by an error
};

// The processes that share a sweep (MPI ranks). The default is one process; apps/kestrel/mpi.cpp
// implements it over MPI. Grid point i (in the order of the HDF5 rows) belongs to rank i % size.
class SweepGroup {
 public:
  virtual ~SweepGroup() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Collective: every rank passes its message and receives all ranks' messages, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& msg) { return {msg}; }
};

void validate(const SweepOptions& opt);
nlohmann::json to_json(const SweepOptions& opt);

struct SweepReport {
  std::vector<ResultRow> rows;            // in grid order (features: M used, 2M for halve-real); rank 0 only
  std::size_t computed = 0, resumed = 0;  // over all ranks on rank 0, this rank's elsewhere
  std::string undefined;                  // undefined_summary() of the rows ("" if all are ok)
};

// A `results` entry of `kestrel sweep --json`: to_json(row) with the grid point also under the keys dim
// and points (the HDF5 column names).
nlohmann::json sweep_json(const ResultRow& row);

// True when opt.out holds a finished sweep with the same options except the grid axes: running opt then
// extends it (its rows are reused from the file's /sweep/resume record, only new grid points are computed),
// so it may replace that file without --force.
bool sweep_extends(const SweepOptions& opt);

// Runs (or resumes, or extends) the sweep and writes opt.out; provenance goes into the file's root attributes.
// A second sweep into the same out fails at once (a lock in OUT.parts/). An estimator undefined at a
// grid point is a row with its status and reason; the sweep completes.
// With several ranks: a rank whose points fail throws its own error, and rank 0 throws an IoError
// naming every grid point lost (the finished parts stay for a resume); the other ranks return.
SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress = {});
SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress, SweepGroup& group);

}  // namespace kestrel
