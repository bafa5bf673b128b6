// Sweeps shared among ranks (issue #10) tested without MPI: the ranks are threads of this process
// with a SweepGroup over std::barrier, exactly the protocol the MPI group runs (lib/analysis/sweep.hpp).
#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "analysis/sweep.hpp"
#include "cli_run.hpp"
#include "core/error.hpp"
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
