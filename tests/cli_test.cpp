// End-to-end tests of the `kestrel` program: JSON summary keys, HDF5 output with provenance,
// identical results for 1 and 2 threads, and bad input (one-line error, non-zero exit, no file).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <hdf5.h>
#include <hdf5_hl.h>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "core/blas_core.hpp"
#include "core/error.hpp"
#include "io/hdf5.hpp"
#include "kestrel_paths.hpp"

namespace fs = std::filesystem;

using kestrel::test::CliRun;
using kestrel::test::fmt_name;
using kestrel::test::run;

constexpr const char* kSmall =
    "variance --regime normal --sigma 0.5,1 --dim 8 --points 64 --pairs 2 --seed 3 "
    "--estimators trig,pos,gerf,oprf --quiet";

TEST(Cli, JsonSummaryHasTheStableKeys) {
  const CliRun r = run(std::string(kSmall) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 8u);  // 4 estimators x 2 sigmas
  for (const auto& e : j["results"]) {
    for (const char* k : {"estimator", "regime", "sigma", "d", "L", "mean_log_var", "std_log_var", "mean_log_rel_var",
                          "std_log_rel_var", "params"})
      EXPECT_TRUE(e.contains(k)) << k;
    EXPECT_TRUE(std::isfinite(e["mean_log_var"].get<double>()));
    EXPECT_EQ(e["n_pairs"].get<int>(), 2 * 64 * 64);
  }
  EXPECT_EQ(j["provenance"]["options"]["seed"].get<int>(), 3);
  EXPECT_FALSE(j["provenance"]["git_revision"].get<std::string>().empty());
}

TEST(Cli, ResultsIdenticalForOneAndTwoThreads) {
  const CliRun a = run(std::string(kSmall) + " --json --mc 50 --mc-points 8 --threads 1");
  const CliRun b = run(std::string(kSmall) + " --json --mc 50 --mc-points 8 --threads 2");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["results"], nlohmann::json::parse(b.out)["results"]);
}

TEST(Cli, WritesHdf5WithProvenance) {
  const fs::path out = fs::temp_directory_path() / (fmt_name("kestrel") + ".h5");
  const CliRun r = run(std::string(kSmall) + " --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("oprf"), std::string::npos);  // the table
  const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  double sig[2], mlv[2];
  EXPECT_GE(H5LTread_dataset_double(f, "/variance/oprf/sigma", sig), 0);
  EXPECT_GE(H5LTread_dataset_double(f, "/variance/oprf/mean_log_var", mlv), 0);
  EXPECT_EQ(sig[0], 0.5);
  EXPECT_EQ(sig[1], 1.0);
  EXPECT_TRUE(std::isfinite(mlv[0]) && std::isfinite(mlv[1]));
  char buf[65536] = {};
  ASSERT_GE(H5LTget_attribute_string(f, "/", "provenance", buf), 0);
  const auto prov = nlohmann::json::parse(buf);
  for (const char* k : {"git_revision", "command", "options", "library_versions", "created_utc"})
    EXPECT_TRUE(prov.contains(k)) << k;
  H5Fclose(f);
  fs::remove(out);
}

TEST(Hdf5, LargeJsonGoesToAStringDatasetAndAttributesRefuseIt) {
  const fs::path out = fs::temp_directory_path() / (fmt_name("kestrel_big") + ".h5");
  const std::string big(300000, 'x');
  {
    kestrel::H5Writer h5(out.string());
    h5.write_text("/g/params", big, {"a large text dataset", "text"});
    EXPECT_THROW(h5.attr("/", "too_big", big), kestrel::IoError);
    EXPECT_THROW(h5.write("/nan", std::vector<double>{1.0, std::nan("")}, {"nan", "row"}), kestrel::NumericalError);
    EXPECT_THROW(h5.write("/inf", arma::mat(2, 2, arma::fill::value(arma::datum::inf)), {"inf", "row,col"}),
                 kestrel::NumericalError);
    h5.commit();
  }
  const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  std::string back(big.size() + 1, '\0');
  ASSERT_GE(H5LTread_dataset_string(f, "/g/params", back.data()), 0);
  EXPECT_EQ(std::string(back.c_str()), big);
  H5Fclose(f);
  fs::remove(out);
}

TEST(Cli, BadInputGivesOneLineErrorAndNoFile) {
  const fs::path out = fs::temp_directory_path() / (fmt_name("kestrel_bad") + ".h5");
  const std::vector<std::pair<std::string, std::string>> cases = {{"--estimators trig,bogus", "bogus"},
                                                                  {"--sigma -1", "sigma"},
                                                                  {"--sigma 0", "sigma"},
                                                                  {"--sigma nan", "sigma"},
                                                                  {"--dim 0", "--dim"},
                                                                  {"--points 0", "--points"},
                                                                  {"--regime moon", "moon"},
                                                                  {"--kernel laplace", "laplace"},
                                                                  {"--sampler sobol", "sobol"},
                                                                  {"--pairs 0", "--pairs"},
                                                                  {"--mc 2", "at least 4"},
                                                                  {"--dim abc", "abc"},
                                                                  {"--features 0", "--features"}};
  for (const auto& [args, word] : cases) {
    std::string base = "variance --quiet";
    for (const char* def : {"--dim 4", "--points 8", "--pairs 1"})
      if (args.find(std::string(def).substr(0, 6)) == std::string::npos) base += std::string(" ") + def;
    const CliRun r = run(base + " " + args + " --out " + out.string());
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(word), std::string::npos) << args << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " -> " << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  const CliRun missing_dir = run("variance --dim 4 --points 8 --pairs 1 --quiet --out /nonexistent/dir/x.h5");
  EXPECT_NE(missing_dir.code, 0);
  EXPECT_NE(missing_dir.err.find("does not exist"), std::string::npos) << missing_dir.err;
}

TEST(Cli, ImageRegimesRunOnRealData) {
  for (const char* regime : {"mnist", "cifar10", "mnist/cifar10"}) {
    const CliRun r = run(std::string("variance --regime ") + regime +
                         " --sigma 1 --dim 64 --points 64 --pairs 1 --estimators trig,oprf --preprocess center --json "
                         "--quiet");
    ASSERT_EQ(r.code, 0) << regime << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& e : j["results"]) EXPECT_TRUE(std::isfinite(e["mean_log_var"].get<double>())) << regime;
    EXPECT_EQ(j["provenance"]["options"]["preprocess"], "center");
  }
  // The image pipeline options reach the provenance (a new pipeline is a new pool, scripts/mnist_pipelines.py).
  // The pixel scale is read by raw and center only (with standardize-global it is refused: BadInputs).
  const CliRun p = run(
      "variance --regime mnist/cifar10 --sigma 1 --dim 64 --points 64 --pairs 1 --estimators oprf,sderf --json --quiet "
      "--preprocess center --resize bilinear-aa --pixel-scale 255");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto jp = nlohmann::json::parse(p.out);
  for (const auto& e : jp["results"]) EXPECT_TRUE(std::isfinite(e["mean_log_var"].get<double>()));
  EXPECT_EQ(jp["provenance"]["options"]["resize"], "bilinear-aa");
  EXPECT_EQ(jp["provenance"]["options"]["pixel-scale"], "255");  // as the command line spells it
  const CliRun g =
      run("variance --regime mnist/cifar10 --sigma 1 --dim 64 --points 64 --pairs 1 --estimators oprf --json --quiet "
          "--preprocess standardize-global");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["provenance"]["options"]["preprocess"], "standardize-global");
  const CliRun bad = run("variance --regime mnist --dim 63 --points 8 --pairs 1 --quiet");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("d = s^2"), std::string::npos) << bad.err;
}

// --quantity kc / attention: every row says its quantity; families with a three-point form are exact and agree with
// the simulator on the --mc subset; a family without one (geom) gets Monte Carlo rows marked as such. Agreement rule:
// an entry's empirical variance (or MSE) within 3 of its standard errors of the exact (predicted) value has
// probability about 0.9973 under the normal approximation, so at least 9 of 32 entries outside has probability at most
// 32 * 0.0027 / 9 < 1% (Markov, whatever the dependence between entries; about 1e-16 were they independent), and at
// least 4 of the 12-16 attention rows compared outside at most 16 * 0.0027 / 4 ~ 1%.
TEST(Cli, QuantityKcAndAttentionRows) {
  for (const char* q : {"kc", "attention"}) {
    const bool kc = std::string(q) == "kc";
    // Attention: M = 256 puts every row's normaliser well inside the delta method's range (relative variance < 0.01).
    const CliRun r = run(std::string("variance --quantity ") + q +
                         " --regime normal --sigma 0.3 --dim 4 --points 48 --pairs 1 --seed 5 --value-dim 2 "
                         "--estimators pos,oprf,sderf,geom --mc 3000 --mc-points 16 --json --quiet --features " +
                         (kc ? "1" : "256"));
    ASSERT_EQ(r.code, 0) << q << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["provenance"]["options"]["quantity"], q);
    ASSERT_EQ(j["results"].size(), 4u);
    for (const auto& e : j["results"]) {
      const std::string name = e["estimator"];
      EXPECT_EQ(e["quantity"], q) << name;
      EXPECT_EQ(e["status"], "ok") << name;
      EXPECT_TRUE(std::isfinite(e["mean_log_var"].get<double>())) << name;
      // Entries of K-hat V are 48 x 2 and attention rows 48; Monte Carlo rows cover the first --mc-points points.
      const int rows = name == "geom" ? 16 : 48;
      EXPECT_EQ(e["n_pairs"].get<int>(), kc ? 2 * rows : rows) << name;
      if (name == "geom") {
        EXPECT_TRUE(e.contains("empirical_reps")) << e.dump();
        EXPECT_FALSE(e.contains("mc")) << name;
        continue;
      }
      ASSERT_TRUE(e.contains("mc")) << name;
      if (!kc) {
        EXPECT_EQ(e["n_flagged"].get<int>(), 0) << name;
      }
      // Attention compares the rows inside the delta method's range on the subset (16 keys: PosRF loses one row).
      EXPECT_GE(e["mc"]["entries"].get<int>(), kc ? 32 : 12) << name;
      EXPECT_LE(e["mc"]["entries"].get<int>(), kc ? 32 : 16) << name;
      EXPECT_GE(e["mc"]["frac_var_within_3se"].get<double>(), 0.75) << e.dump();
    }
  }
  // The HDF5 table says what its rows summarise.
  const fs::path out = fs::temp_directory_path() / (fmt_name("kestrel_q") + ".h5");
  const CliRun w = run("variance --quantity attention --dim 4 --points 16 --pairs 1 --estimators oprf --quiet --out " +
                       out.string());
  ASSERT_EQ(w.code, 0) << w.err;
  const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  char text[512] = {};
  ASSERT_GE(H5LTget_attribute_string(f, "variance/oprf", "quantity", text), 0);
  EXPECT_EQ(std::string(text).rfind("attention:", 0), 0u) << text;
  H5Fclose(f);
  fs::remove(out);
}

TEST(Cli, DatasetsListsAndVerifies) {
  const CliRun r = run("datasets");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"mnist", "cifar10", "uci/car", "uci/krkopt"}) EXPECT_NE(r.out.find(name), std::string::npos);
  EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos);
  const CliRun missing = run("datasets --data-dir /nonexistent");
  EXPECT_NE(missing.code, 0);
  EXPECT_EQ(missing.code, 2);  // invalid input: --data-dir is not a directory
  EXPECT_NE(missing.err.find("/nonexistent"), std::string::npos) << missing.err;
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"variance", "estimators", "datasets", "sweep", "reproduce"}) {
    const CliRun r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << sub;
  }
}

TEST(Cli, SweepResumesAfterInterruptionWithIdenticalResults) {
  const fs::path dir = fs::temp_directory_path() / fmt_name("kestrel_sweep");
  fs::create_directories(dir);
  const std::string grid =
      "sweep --sigma 0.5,1 --dim 4,8 --points 32 --features 1,4 --pairs 2 --estimators oprf,trig "
      "--json --quiet --out ";
  const CliRun whole = run(grid + (dir / "whole.h5").string() + " --threads 1");
  ASSERT_EQ(whole.code, 0) << whole.err;
  const CliRun stopped = run(grid + (dir / "resumed.h5").string(), "KESTREL_TEST_SWEEP_STOP=after=5 ");
  EXPECT_NE(stopped.code, 0);
  EXPECT_FALSE(fs::exists(dir / "resumed.h5"));  // no partial file
  EXPECT_TRUE(fs::exists(dir / "resumed.h5.parts"));
  const CliRun resumed = run(grid + (dir / "resumed.h5").string() + " --threads 2");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(whole.out)["results"], nlohmann::json::parse(resumed.out)["results"]);
  EXPECT_EQ(nlohmann::json::parse(whole.out)["results"].size(), 2u * 2 * 2 * 2);
  EXPECT_TRUE(fs::exists(dir / "resumed.h5"));
  EXPECT_FALSE(fs::exists(dir / "resumed.h5.parts"));  // cleaned up once the file is complete
  // Parts of a different sweep are refused rather than mixed in.
  EXPECT_NE(run(grid + (dir / "other.h5").string(), "KESTREL_TEST_SWEEP_STOP=after=1 ").code, 0);
  // The testing hook is an environment switch, not an option a user sees (issue 69 item 5); a malformed one is named.
  EXPECT_EQ(run(grid + (dir / "hook.h5").string() + " --stop-after 1").code, 2);
  for (const std::string bad : {"after=0", "after=x", "rank=1", "after=1,sleep"}) {
    const CliRun r = run(grid + (dir / "hook.h5").string(), "KESTREL_TEST_SWEEP_STOP=" + bad + " ");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("KESTREL_TEST_SWEEP_STOP='" + bad + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "hook.h5")) << bad;
  }
  const CliRun mixed = run("sweep --sigma 2 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet --out " +
                           (dir / "other.h5").string());
  EXPECT_NE(mixed.code, 0);
  EXPECT_NE(mixed.err.find("other options"), std::string::npos) << mixed.err;
  fs::remove_all(dir);
}

TEST(Cli, SweepReadsATomlConfig) {
  const fs::path dir = fs::temp_directory_path() / fmt_name("kestrel_sweep_cfg");
  fs::create_directories(dir);
  {
    std::ofstream c(dir / "sweep.toml");
    c << "[sweep]\nregime = \"sphere\"\nsigma = [0.5, 1.0]\ndim = [4]\npoints = [16]\npairs = 1\nestimators = "
         "[\"pos\", "
         "\"oprf\"]\n";
  }
  const CliRun r =
      run("sweep --config " + (dir / "sweep.toml").string() + " --json --quiet --out " + (dir / "s.h5").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 4u);
  EXPECT_EQ(j["results"][0]["regime"], "sphere");
  fs::remove_all(dir);
}

// Issue 49 item 2: kestrel takes OpenBLAS's fast kernels by itself. The core for CPU flags is chosen in one place
// (core/blas_core.hpp); where OpenBLAS falls back to its generic Prescott kernels and the CPU supports better ones,
// `kestrel` starts itself again with OPENBLAS_CORETYPE set: the last "Core:" line OpenBLAS prints is the one it runs,
// `--version` and every output's provenance name it, and a value the user set is kept.
TEST(Cli, TakesTheFastOpenBlasKernelsAndKeepsAUserChoice) {
  EXPECT_EQ(kestrel::openblas_core_for_flags("fpu sse3 avx2 fma avx512f avx512bw avx512vl avx512_bf16"), "Cooperlake");
  EXPECT_EQ(kestrel::openblas_core_for_flags("sse3 avx2 fma avx512f avx512bw avx512vl"), "SkylakeX");
  EXPECT_EQ(kestrel::openblas_core_for_flags("sse3 avx2 fma avx512f"), "Haswell");  // no BW/VL: not SkylakeX
  EXPECT_EQ(kestrel::openblas_core_for_flags("sse3 avx2"), "");                     // AVX2 without FMA
  EXPECT_EQ(kestrel::openblas_core_for_flags(""), "");
  const std::string better = kestrel::openblas_core_for_this_cpu();
  // The core a run of `kestrel --version` reports: the last "Core:" line of OpenBLAS and the version listing's.
  const auto cores = [](const std::string& env) {
    const CliRun r = run("--version", "env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 " + env + " ");
    EXPECT_EQ(r.code, 0) << r.err;
    std::string verbose, listed;
    std::istringstream err(r.err), out(r.out);
    for (std::string line; std::getline(err, line);)
      if (line.rfind("Core: ", 0) == 0) verbose = line.substr(6);
    for (std::string line; std::getline(out, line);)
      if (line.rfind("  openblas_core ", 0) == 0) listed = line.substr(16);
    return std::pair{verbose, listed};
  };
  const auto [verbose, listed] = cores("");
  if (verbose.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS (no Core: line with OPENBLAS_VERBOSE=2)";
  EXPECT_EQ(listed, verbose);
  if (!better.empty()) EXPECT_NE(verbose, "Prescott") << "this CPU supports " << better;
  // Provenance of an output names the same core.
  const CliRun v = run("variance --sigma 0.5 --dim 4 --points 16 --pairs 1 --estimators oprf --quiet --json",
                       "env -u OPENBLAS_CORETYPE ");
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_EQ(nlohmann::json::parse(v.out)["provenance"]["library_versions"]["openblas_core"], verbose);
  // Where OpenBLAS reports its generic kernels while OPENBLAS_CORETYPE is unset (as on a CPU it cannot identify;
  // tests/blas/generic_core.cpp stands in for its answer), kestrel starts again and runs this CPU's core.
  if (!better.empty()) {
    const CliRun g = run("--version", "env -u OPENBLAS_CORETYPE ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=" +
                                          std::string(KESTREL_GENERIC_CORE) + " ");
    ASSERT_EQ(g.code, 0) << g.err;
    EXPECT_NE(g.out.find("  openblas_core " + better + "\n"), std::string::npos) << g.out;
  }
  // The decisions alone: start again only from the generic kernels, never over the user's value; warn (Python, where
  // OpenBLAS was loaded before kestrel) about the generic kernels unless the user asked for them.
  EXPECT_EQ(kestrel::openblas_core_to_set(nullptr, "Prescott", "Cooperlake"), "Cooperlake");
  EXPECT_EQ(kestrel::openblas_core_to_set("Prescott", "Prescott", "Cooperlake"), "");
  EXPECT_EQ(kestrel::openblas_core_to_set(nullptr, "Zen", "Haswell"), "");
  EXPECT_EQ(kestrel::openblas_core_to_set(nullptr, "Prescott", ""), "");
  EXPECT_NE(kestrel::openblas_core_warning(nullptr, "Prescott", "SkylakeX").find("set OPENBLAS_CORETYPE=SkylakeX"),
            std::string::npos);
  EXPECT_NE(kestrel::openblas_core_warning("SkylakeX", "Prescott", "SkylakeX"), "");  // set, but too late
  EXPECT_EQ(kestrel::openblas_core_warning("prescott", "Prescott", "SkylakeX"), "");
  EXPECT_EQ(kestrel::openblas_core_warning(nullptr, "Cooperlake", "Cooperlake"), "");
  EXPECT_EQ(kestrel::openblas_core_warning(nullptr, "Prescott", ""), "");
  // A value the user set is kept: Prescott (never chosen by kestrel) and, on a CPU with AVX2 and FMA, Haswell.
  EXPECT_EQ(cores("OPENBLAS_CORETYPE=Prescott"), std::pair(std::string("Prescott"), std::string("Prescott")));
  if (!better.empty())
    EXPECT_EQ(cores("OPENBLAS_CORETYPE=Haswell"), std::pair(std::string("Haswell"), std::string("Haswell")));
}
