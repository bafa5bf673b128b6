// `kestrel advise --sums/--chunk` end to end (the key sums in number formats, tasks/advise/sums.cpp): the report's
// JSON, HDF5 and table, rounding errors ordered as the formats' precisions, and bad values refused (exit 2, one line,
// no file).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "core/hdf5_reader.hpp"

namespace kestrel {
namespace {

using test::run;
namespace fs = std::filesystem;

// Queries, keys (300 x 8, N(0, 0.5^2)) and values (300 x 4, N(1, 1)) as CSV in dir; the advise arguments.
std::string inputs(const fs::path& dir) {
  std::mt19937_64 g(5);
  std::normal_distribution<double> n(0, 1);
  for (const char* name : {"q.csv", "k.csv", "v.csv"}) {
    std::ofstream f(dir / name);
    const int cols = name[0] == 'v' ? 4 : 8;
    for (int i = 0; i < 300; ++i)
      for (int j = 0; j < cols; ++j) f << (name[0] == 'v' ? 1 + n(g) : 0.5 * n(g)) << (j + 1 == cols ? "\n" : ",");
  }
  return "advise --queries " + (dir / "q.csv").string() + " --keys " + (dir / "k.csv").string() + " --values " +
         (dir / "v.csv").string() + " --estimators pos --samplers iid --budget 256 --target 0.2 --rows 64 --quiet";
}

void expect_refused(const test::CliRun& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << "'" << w << "' in " << r.err;
}

TEST(AdviseSums, ReportsEveryFormatInJsonHdf5AndTheTable) {
  const fs::path dir = test::temp_dir("kestrel_advise_sums");
  const std::string adv = inputs(dir), out = (dir / "a.h5").string();
  const test::CliRun r = run(adv + " --sums fp32,bf16,fp16 --chunk 64 --no-timing --json --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out)["advice"]["sums"];
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_EQ(s["estimator"], "pos");
  EXPECT_EQ(s["chunk"], 64);
  EXPECT_EQ(s["lengths"].back(), 300);
  const auto& f = s["formats"];
  const auto n = s["lengths"].size();
  for (const char* name : {"fp32", "bf16", "fp16"}) {
    ASSERT_EQ(f[name]["rounding_p95"].size(), n) << name;  // features <= 1 and |v| < 8: no overflow here
    EXPECT_TRUE(f[name]["overflow_length"].is_null()) << name;
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_TRUE(std::isfinite(f[name]["error_p95"][k].get<double>())) << name;
      EXPECT_GT(f[name]["rounding_p95"][k].get<double>(), 0) << name << " rounds nothing at " << k;
    }
  }
  // Rounding grows as precision falls: fp32 (2^-24) far below bf16 (2^-9); fp16 (2^-11) below bf16 at the end, where
  // no fp16 feature is lost (stabilised features <= 1 of N(0, 0.5^2) inputs are far above fp16's subnormals).
  const double r32 = f["fp32"]["rounding_p95"].back(), r16 = f["fp16"]["rounding_p95"].back(),
               rb = f["bf16"]["rounding_p95"].back();
  EXPECT_LT(100 * r32, r16);
  EXPECT_LT(r16, rb);
  EXPECT_LT(rb, 0.05);  // bf16's relative spacing 2^-8 per stored value, over 64-key fp32 chunks: well below 5%
  EXPECT_TRUE(fs::exists(out));
  H5Reader h5(out);
  EXPECT_EQ(h5.read_vec("/advise/sums/fp16/rounding_p95").n_elem, n);
  EXPECT_FALSE(h5.attr_string("/advise/sums/fp16/rounding_p95", "description").empty());
  // The table: one row per length, every line within 120 characters.
  const test::CliRun t = run(adv + " --sums bf16,fp16 --no-timing");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("key sums in number formats"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("fp16 error"), std::string::npos) << t.out;
  std::istringstream lines(t.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 120u) << line;
  fs::remove_all(dir);
}

// Maps with more feature columns than M (the hyperbolic PRF's pairs exp(+-w.x): 2M) have sums as wide as their
// features: a recommended pos-hyp row once stopped --sums with "expected 16 x 1 features ..., got 16 x 2".
TEST(AdviseSums, PairedFeaturesAreSummedAtTheirWidth) {
  const fs::path dir = test::temp_dir("kestrel_advise_sums_anti");
  std::string adv = inputs(dir);
  adv.replace(adv.find("--estimators pos "), 17, "--estimators pos-hyp ");
  adv.replace(adv.find("--target 0.2"), 12, "--target 0.9");  // met at one draw: one pair, M = 2 columns
  const test::CliRun r = run(adv + " --sums bf16,fp16 --no-timing --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out)["advice"]["sums"];
  EXPECT_EQ(s["estimator"], "pos-hyp");
  EXPECT_EQ(s["m"], 2);
  for (const char* name : {"bf16", "fp16"})
    EXPECT_EQ(s["formats"][name]["rounding_p95"].size(), s["lengths"].size()) << name;
  fs::remove_all(dir);
}

TEST(AdviseSums, BadValuesAreRefused) {
  const fs::path dir = test::temp_dir("kestrel_advise_sums_bad");
  const std::string adv = inputs(dir), out = (dir / "a.h5").string();
  expect_refused(run(adv + " --sums fp8 --out " + out), {"--sums", "'fp8'", "fp16"});
  expect_refused(run(adv + " --sums fp16 --chunk 0 --out " + out), {"--chunk", "'0'"});
  expect_refused(run(adv + " --chunk 8 --out " + out), {"--chunk '8'", "--sums"});
  expect_refused(run(adv + " --sums fp16,fp16 --out " + out), {"--sums", "fp16"});
  const std::string no_values = adv.substr(0, adv.find(" --values")) + adv.substr(adv.find(" --estimators"));
  expect_refused(run(no_values + " --sums fp16 --out " + out), {"sums", "values"});
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel
