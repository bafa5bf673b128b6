// Sweeps shared among ranks (issue #10) tested without MPI: the ranks are threads of this process
// with a SweepGroup over std::barrier, exactly the protocol the MPI group runs (lib/analysis/sweep.hpp).
// Sweeps in shards (issue 51): shards of different N merge to the rows and the file of one process.
#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "analysis/sweep.hpp"
#include "cli_run.hpp"
#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "frontend/study_options.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"

namespace fs = std::filesystem;
using namespace kestrel;

namespace {

// A complete provenance record (the file writer reads every field of it).
nlohmann::json test_provenance() { return provenance("sweep_ranks_test", nlohmann::json::object()); }

struct Shared {
  explicit Shared(int n) : slots(n), sync(n) {}
  std::vector<std::string> slots;
  std::barrier<> sync;
};

class ThreadGroup : public SweepGroup {
 public:
  ThreadGroup(Shared& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(s_.slots.size()); }
  std::vector<std::string> all_gather(const std::string& msg) override {
    s_.slots[rank_] = msg;
    s_.sync.arrive_and_wait();
    std::vector<std::string> all = s_.slots;
    s_.sync.arrive_and_wait();  // nobody overwrites a slot before every rank has read it
    return all;
  }

 private:
  Shared& s_;
  int rank_;
};

struct RankOutcome {
  SweepReport report;
  std::string error;  // what() of the exception the rank threw, empty if it returned
};

// Records the options like the command line, so that a merge can check the shards ran the same sweep.
nlohmann::json sweep_provenance(const SweepOptions& o) {
  return provenance("sweep_ranks_test", o.recorded, study_inputs(o.base));
}

std::vector<RankOutcome> run_ranks(const SweepOptions& opt, int n) {
  Shared shared(n);
  std::vector<RankOutcome> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadGroup g(shared, r);
      try {
        out[r].report = run_sweep(opt, test_provenance(), {}, g);
      } catch (const std::exception& e) {
        out[r].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

SweepOptions small_sweep(const fs::path& out) {
  SweepOptions o;
  o.base.regime = "normal", o.base.pairs = 2, o.base.seed = 7, o.base.estimators = {"oprf", "trig"};
  o.sigmas = {0.5, 1.0}, o.dims = {4, 8}, o.points = {32}, o.features = {1, 4};
  o.out = out.string();
  o.recorded = record_sweep(o);  // as sweep_options() records them
  return o;
}

nlohmann::json rows(const SweepReport& rep) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rep.rows) j.push_back(to_json(r));
  return j;
}

using test::temp_dir;

}  // namespace

TEST(SweepRanks, ThreeRanksGiveTheRowsOfOneProcess) {
  const fs::path dir = temp_dir("kestrel_ranks");
  const SweepReport one = run_sweep(small_sweep(dir / "one.h5"), test_provenance());
  const auto three = run_ranks(small_sweep(dir / "three.h5"), 3);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(three[r].error, "") << "rank " << r;
  EXPECT_EQ(three[0].report.computed, 8u);  // rank 0 counts every rank's points
  EXPECT_EQ(three[1].report.computed, 3u);  // points 1, 4, 7
  EXPECT_EQ(three[2].report.computed, 2u);  // points 2, 5
  EXPECT_TRUE(three[1].report.rows.empty());
  EXPECT_EQ(rows(one).size(), 16u);
  EXPECT_EQ(rows(three[0].report), rows(one));
  EXPECT_TRUE(fs::exists(dir / "three.h5"));
  EXPECT_FALSE(fs::exists(dir / "three.h5.parts"));
  fs::remove_all(dir);
}

TEST(SweepRanks, AFailedRankNamesTheLostPointsAndTheRerunResumes) {
  const fs::path dir = temp_dir("kestrel_ranks_fail");
  SweepOptions o = small_sweep(dir / "s.h5");
  o.stop_after = 1, o.stop_rank = 1;
  const auto failed = run_ranks(o, 3);
  EXPECT_NE(failed[0].error.find("(rank 1: sweep stopped after 1 points (testing hook)): 2 of 8 grid points lost: "
                                 "d=8 L=32 M=1 sigma=0.5; d=8 L=32 M=4 sigma=1."),
            std::string::npos)
      << failed[0].error;
  EXPECT_EQ(failed[1].error, "sweep stopped after 1 points (testing hook)");
  EXPECT_EQ(failed[2].error, "");  // its own share is done; rank 0 reports the run
  EXPECT_FALSE(fs::exists(dir / "s.h5"));
  o.stop_after = 0;
  const auto resumed = run_ranks(o, 2);
  ASSERT_EQ(resumed[0].error, "");
  EXPECT_EQ(resumed[0].report.computed, 2u);
  EXPECT_EQ(resumed[0].report.resumed, 6u);
  const SweepReport one = run_sweep(small_sweep(dir / "one.h5"), test_provenance());
  EXPECT_EQ(rows(resumed[0].report), rows(one));
  fs::remove_all(dir);
}

TEST(SweepRanks, RejectsAnInvalidRank) {
  struct Bad : SweepGroup {
    int rank() const override { return 2; }
    int size() const override { return 2; }
  } bad;
  const fs::path dir = temp_dir("kestrel_ranks_bad");
  EXPECT_THROW(run_sweep(small_sweep(dir / "s.h5"), test_provenance(), {}, bad), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir / "s.h5.parts"));
  fs::remove_all(dir);
}

namespace {

SweepOptions shard(SweepOptions o, std::size_t k, std::size_t n) {
  o.shard = {k, n};
  return o;
}

SweepReport run_shard(const SweepOptions& o, std::size_t k, std::size_t n) {
  const SweepOptions s = shard(o, k, n);
  return run_sweep(s, sweep_provenance(s));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Shards 0/3 and 2/3, then 0/2 and 1/2 after a "resubmission" with another N: each grid point is computed once, by
// whichever shard owns it first, and the merge gives the rows of one process: a grid point's results (its seeds) do
// not depend on N. Before the last shard the merge names the missing points with their shards and writes nothing.
TEST(SweepShards, ShardsOfAnyNMergeToTheOneProcessRows) {
  const fs::path dir = temp_dir("kestrel_shards");
  const SweepOptions o = small_sweep(dir / "s.h5");
  const SweepReport one = run_sweep(small_sweep(dir / "one.h5"), sweep_provenance(o));
  const SweepReport s0 = run_shard(o, 0, 3);
  EXPECT_EQ(s0.computed, 3u);  // points 0, 3, 6
  EXPECT_EQ(s0.rows.size(), 6u);
  EXPECT_EQ(s0.finished, 3u);
  EXPECT_EQ(s0.total, 8u);
  EXPECT_FALSE(fs::exists(dir / "s.h5"));
  EXPECT_EQ(run_shard(o, 2, 3).computed, 2u);  // points 2, 5
  const std::string missing = error_of([&] { merge_sweep(o.out, false); });
  EXPECT_NE(missing.find("3 of 8 grid points are missing: #1 d=4 L=32 M=1 sigma=1 (shard 1/3); "
                         "#4 d=8 L=32 M=1 sigma=0.5 (shard 1/3); #7 d=8 L=32 M=4 sigma=1 (shard 1/3)"),
            std::string::npos)
      << missing;
  EXPECT_THROW(merge_sweep(o.out, false), Incomplete);
  EXPECT_FALSE(fs::exists(dir / "s.h5"));
  const SweepReport s2 = run_shard(o, 0, 2);  // points 0, 2, 4, 6: all but 4 are done
  EXPECT_EQ(s2.computed, 1u);
  EXPECT_EQ(s2.resumed, 3u);
  EXPECT_NE(error_of([&] { merge_sweep(o.out, false); }).find("(shard 1/2 or 1/3); #7"), std::string::npos);
  const SweepReport s3 = run_shard(o, 1, 2);  // points 1, 3, 5, 7: 3 and 5 are done
  EXPECT_EQ(s3.computed, 2u);
  EXPECT_EQ(s3.resumed, 2u);
  EXPECT_EQ(s3.finished, 8u);
  const SweepReport merged = merge_sweep(o.out, false);
  EXPECT_EQ(rows(one).size(), 16u);
  EXPECT_EQ(rows(merged), rows(one));
  EXPECT_EQ(merged.provenance["shards"], nlohmann::json({"0/2", "0/3", "1/2", "2/3"}));
  EXPECT_FALSE(fs::exists(dir / "s.h5.parts"));
  // The file is the one-process file: same table and resume record (h5_same.py compares every dataset in the
  // Slurm and MPI tests).
  const H5Reader a((dir / "one.h5").string()), b((dir / "s.h5").string());
  EXPECT_EQ(a.read_text("/sweep/resume"), b.read_text("/sweep/resume"));
  EXPECT_EQ(a.attr_string("/", "options"), b.attr_string("/", "options"));
  fs::remove_all(dir);
}

// Two MPI ranks inside shard 1/2 share the shard's points 1, 3, 5, 7: rank 0 takes 1 and 5, rank 1 takes 3 and 7.
TEST(SweepShards, RanksShareTheirShard) {
  const fs::path dir = temp_dir("kestrel_shard_ranks");
  const auto ranks = run_ranks(shard(small_sweep(dir / "s.h5"), 1, 2), 2);
  ASSERT_EQ(ranks[0].error, "");
  ASSERT_EQ(ranks[1].error, "");
  EXPECT_EQ(ranks[0].report.computed, 4u);  // rank 0 counts both ranks
  EXPECT_EQ(ranks[1].report.computed, 2u);
  EXPECT_EQ(ranks[0].report.rows.size(), 8u);  // 4 points x 2 estimators
  EXPECT_EQ(ranks[0].report.finished, 4u);
  fs::remove_all(dir);
}

TEST(SweepShards, BadShardsAndMergesAreRefused) {
  const fs::path dir = temp_dir("kestrel_shards_bad");
  SweepOptions o = small_sweep(dir / "s.h5");
  EXPECT_THROW(run_shard(o, 2, 2), InvalidArgument);
  SweepOptions forced = shard(o, 0, 2);
  forced.force = true;
  EXPECT_NE(error_of([&] { run_sweep(forced, sweep_provenance(forced)); }).find("--force cannot be combined"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_sweep(o.out, false); }).find("nothing to merge"), std::string::npos);
  EXPECT_THROW(merge_sweep(o.out, false), InvalidArgument);
  // Issue 68 item 4: an OUT.parts that is a file is named as one (was "does not exist").
  const std::string file_parts = (dir / "f.h5").string();
  { std::ofstream(file_parts + ".parts") << "not a directory"; }
  EXPECT_NE(error_of([&] { merge_sweep(file_parts, false); }).find("f.h5.parts' is not a directory"),
            std::string::npos);
  run_shard(o, 0, 2);
  // A shard of another sweep into the same OUT is refused, naming the difference.
  SweepOptions other = o;
  other.base.seed = 8;
  other.recorded = record_sweep(other);
  EXPECT_NE(error_of([&] { run_shard(other, 1, 2); }).find("--seed 8 here, 7 there"), std::string::npos);
  // A shard that still runs (holds its lock) stops the merge.
  {
    OutputLock running((dir / "s.h5.parts" / "shard-1-of-2.lock").string(), "shard 1/2");
    EXPECT_NE(error_of([&] { merge_sweep(o.out, false); }).find("shard-1-of-2 of the sweep"), std::string::npos);
  }
  run_shard(o, 1, 2);
  // An existing OUT is replaced only with force; nothing is lost by the refusal.
  { std::ofstream(o.out) << "not a sweep"; }
  EXPECT_NE(error_of([&] { merge_sweep(o.out, false); }).find("pass --force"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "s.h5.parts"));
  EXPECT_EQ(merge_sweep(o.out, true).rows.size(), 16u);
  fs::remove_all(dir);
}

// A Slurm job array's task takes its shard from the environment: --array=4-7 (task 5 is shard 1/4), --array=0-12:4
// (task 8 is 2/4); --shard overrides it; indices that are not evenly spaced (--array=1,3) are refused.
TEST(SweepShards, SlurmArrayTaskDefaultsTheShard) {
  using Env = std::map<std::string, std::string>;
  auto shard_in = [](const Env& env, const GivenValues& given = {}) {
    SweepOptions s;
    apply_sweep_run(given, s, [&env](const char* v) { return env.count(v) ? env.at(v).c_str() : nullptr; });
    return to_string(s.shard);
  };
  EXPECT_EQ(shard_in({}), "0/0");  // not sharded
  const Env four = {{"SLURM_ARRAY_TASK_ID", "5"},
                    {"SLURM_ARRAY_TASK_MIN", "4"},
                    {"SLURM_ARRAY_TASK_MAX", "7"},
                    {"SLURM_ARRAY_TASK_STEP", "1"},
                    {"SLURM_ARRAY_TASK_COUNT", "4"}};
  EXPECT_EQ(shard_in(four), "1/4");
  EXPECT_EQ(shard_in(four, {{"shard", {"3/8", "--shard"}}}), "3/8");
  EXPECT_EQ(shard_in({{"SLURM_ARRAY_TASK_ID", "8"},
                      {"SLURM_ARRAY_TASK_MIN", "0"},
                      {"SLURM_ARRAY_TASK_MAX", "12"},
                      {"SLURM_ARRAY_TASK_STEP", "4"},
                      {"SLURM_ARRAY_TASK_COUNT", "4"}}),
            "2/4");
  const Env gaps = {{"SLURM_ARRAY_TASK_ID", "1"},
                    {"SLURM_ARRAY_TASK_MIN", "1"},
                    {"SLURM_ARRAY_TASK_MAX", "3"},
                    {"SLURM_ARRAY_TASK_STEP", "1"},
                    {"SLURM_ARRAY_TASK_COUNT", "2"}};
  EXPECT_NE(error_of([&] { shard_in(gaps); }).find("not evenly spaced"), std::string::npos);
  EXPECT_NE(error_of([&] { shard_in({{"SLURM_ARRAY_TASK_ID", "1"}}); }).find("pass --shard K/N"), std::string::npos);
  for (const char* bad : {"1", "2/2", "a/2", "0/0", "-1/2"})
    EXPECT_THROW(shard_in({}, {{"shard", {bad, "--shard"}}}), InvalidArgument) << bad;
  // Issue 68 item 4: malformed forms are named whole, with the K/N form (not "expected an integer, got '2/3'").
  for (const std::string bad : {"1/2/3", "1/", "/2", "1/99999999999"})
    EXPECT_NE(error_of([&] {
                shard_in({}, {{"shard", {bad, "--shard"}}});
              }).find("--shard: expected K/N (shard K of N: two integers, 0 <= K < N), got '" + bad + "'"),
              std::string::npos)
        << bad;
  // A count near 2^63 (step x (count - 1) wraps around to MAX - MIN) is refused naming it, not taken as 2^63 shards.
  Env wraps = {{"SLURM_ARRAY_TASK_ID", "0"},
               {"SLURM_ARRAY_TASK_MIN", "0"},
               {"SLURM_ARRAY_TASK_MAX", "0"},
               {"SLURM_ARRAY_TASK_STEP", "2"},
               {"SLURM_ARRAY_TASK_COUNT", "9223372036854775809"}};
  EXPECT_NE(error_of([&] { shard_in(wraps); }).find("SLURM_ARRAY_TASK_COUNT: expected an integer in [1, 4294967296]"),
            std::string::npos);
  // Issue 68: a count or step of 0 is named with its range (at least 1), not as unevenly spaced indices.
  for (const auto& [name, range] : std::map<std::string, std::string>{{"SLURM_ARRAY_TASK_COUNT", "in [1, 4294967296]"},
                                                                      {"SLURM_ARRAY_TASK_STEP", ">= 1"}}) {
    Env zero = four;
    zero[name] = "0";
    const std::string said = error_of([&] { shard_in(zero); });
    EXPECT_NE(said.find(name + ": expected an integer " + range + ", got '0'"), std::string::npos) << said;
  }
  wraps["SLURM_ARRAY_TASK_COUNT"] = "2147483649";  // 2^31 + 1: within the range, but 2^33 x 2^31 wraps to 0 = MAX - MIN
  wraps["SLURM_ARRAY_TASK_STEP"] = "8589934592";
  EXPECT_NE(error_of([&] { shard_in(wraps); }).find("not evenly spaced"), std::string::npos);
}
