// Parameter sweeps (`kestrel sweep`): a variance study over the grid sigma x d x L x M for a set of
// estimators. Each grid point is computed independently (so results are identical for any thread
// count and any order) and saved atomically as it finishes in OUT.parts/, which makes an interrupted
// sweep resume without recomputing finished points; the HDF5 file is assembled (atomically) at the end.
// The finished file keeps every grid point's results in /sweep/resume, so a sweep extended by grid values
// (same other options) computes only the new points.
// Across processes (MPI ranks, see SweepGroup) each rank computes a static share of the grid into the
// same OUT.parts/ and rank 0 assembles the file, identical to a one-process run.
// Across jobs (Slurm array tasks, see SweepShard) each shard computes its share into OUT.parts/ and leaves it there;
// merge_sweep assembles the file once every grid point is finished, whatever number of shards computed them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/variance_study.hpp"

namespace kestrel {

// Shard `index` of `count` (the run `--shard K/N`): this run computes grid point i only when i % count == index,
// into OUT.parts/, and does not write OUT (merge_sweep does). count 0: not sharded (the run assembles OUT).
struct SweepShard {
  std::size_t index = 0, count = 0;
};
std::string to_string(const SweepShard& s);  // "K/N"

struct SweepOptions {
  VarianceStudyOptions base;  // regime, pairs, seed, estimators, kernel, regime options, halve_real
  std::vector<double> sigmas = {0.5, 1.0};
  std::vector<arma::uword> dims = {64};
  std::vector<arma::uword> points = {1024};
  std::vector<arma::uword> features = {1};
  std::string out;     // HDF5 path; parts go to out + ".parts/"
  bool force = false;  // replace an existing out
  SweepShard shard;    // how this run takes part (not recorded in the options: any N gives the same file)
  // The options as recorded ({option: value}, the grid axes sigma, dim, points and features as lists), written by the
  // front-end from its option table (frontend/study_options.hpp record_sweep): provenance, parts and resume record.
  nlohmann::json recorded;
  std::size_t stop_after = 0;  // testing hook: stop (throw) after computing this many points; 0 = off
  int stop_rank = -1;          // testing hook: only this rank stops (-1 = every rank)
  bool stop_killed = false;    // testing hook: stop by SIGKILL (a crash, e.g. the OOM killer), not by an error
  bool stop_paused = false;    // testing hook: wait for a signal instead (a task preempted by scancel: SIGTERM)
};

// The processes that share a sweep (MPI ranks). The default is one process; apps/kestrel/mpi.cpp
// implements it over MPI. Grid point i (in the order of the HDF5 rows) belongs to rank i % size (in a shard: the
// shard's j-th point, i = K + j N, belongs to rank j % size).
class SweepGroup {
 public:
  virtual ~SweepGroup() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Collective: every rank passes its message and receives all ranks' messages, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& msg) { return {msg}; }
};

void validate(const SweepOptions& opt);

struct SweepReport {
  std::vector<ResultRow> rows;            // in grid order (features: M used, 2M for halve-real); rank 0 only
  std::size_t computed = 0, resumed = 0;  // over all ranks on rank 0, this rank's elsewhere
  std::string undefined;                  // undefined_summary() of the rows ("" if all are ok)
  std::size_t finished = 0, total = 0;    // a shard's rank 0: grid points of the whole sweep in OUT.parts/, and all
  nlohmann::json provenance;              // merge_sweep: the provenance it wrote into OUT
};

// A `results` entry of `kestrel sweep --json`: to_json(row) with the grid point also under the keys dim
// and points (the HDF5 column names).
nlohmann::json sweep_json(const ResultRow& row);

// True when opt.out holds a finished sweep with the same options except the grid axes: running opt then
// extends it (its rows are reused from the file's /sweep/resume record, only new grid points are computed),
// so it may replace that file without --force. False when the grid leaves out some of the file's grid points: only
// --force drops finished results (validate refuses without it, naming them and the grid that keeps them).
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
// With opt.shard set, run_sweep computes (or resumes) the shard's points into OUT.parts/ with its provenance
// (OUT.parts/shard-K-of-N.json, its lock shard-K-of-N.lock) and returns the shard's rows; OUT is not written. Shards
// of other N may add to the same parts (a resubmission): a grid point's results do not depend on who computes it.

// `kestrel sweep merge OUT`: assembles OUT from the parts the shards left in OUT.parts/, the same file as a
// one-process run of the same command (the provenance of a shard, with `shards` listing those that ran and the
// time of the merge), and removes the parts. Throws InvalidArgument when there are no shards' parts, when a shard
// recorded other options, or when OUT exists (without force; extending a finished sweep needs none, a grid that leaves
// out its finished points needs it), InputFileError naming a broken part or record and the shard to rerun, IoError when
// a shard still runs, and Incomplete naming the missing grid points (and their shards) when some are missing: then
// nothing is written and the parts stay.
SweepReport merge_sweep(const std::string& out, bool force);

}  // namespace kestrel
