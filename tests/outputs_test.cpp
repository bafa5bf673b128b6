// End-to-end tests of issue #15 items 4-7: outputs are never replaced without --force and never
// written to anything but a regular file; temporary files vanish on SIGINT; a second sweep on the
// same output fails at once; an undefined estimator is a recorded result that does not stop the
// study; untrusted Monte Carlo is flagged; HDF5 datasets describe themselves; claims tables are
// valid Markdown.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <hdf5.h>
#include <hdf5_hl.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include "analysis/variance_study.hpp"
#include "cli_run.hpp"
#include "core/error.hpp"
#include "io/output.hpp"
#include "kestrel_paths.hpp"

namespace fs = std::filesystem;
using kestrel::test::CliRun;
using kestrel::test::fmt_name;
using kestrel::test::run;

namespace {

constexpr const char* kTiny = "variance --sigma 0.5 --dim 4 --points 16 --pairs 1 --estimators oprf --quiet";

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path;
  explicit TempDir(const char* stem) : path(fs::temp_directory_path() / fmt_name(stem)) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

bool any_temp_left(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Outputs, ExistingFileIsReplacedOnlyWithForce) {
  TempDir dir("kestrel_force");
  const std::string out = dir / "r.h5";
  { std::ofstream(out) << "precious"; }
  const CliRun refused = run(std::string(kTiny) + " --out " + out);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find(out), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(slurp(out), "precious");
  const CliRun forced = run(std::string(kTiny) + " --force --out " + out);
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(slurp(out), "precious");
  // The same for sweep and reproduce.
  const std::string sweep_out = dir / "s.h5";
  { std::ofstream(sweep_out) << "precious"; }
  const CliRun sweep =
      run("sweep --sigma 0.5 --dim 4 --points 16 --pairs 1 --estimators oprf --quiet --out " + sweep_out);
  EXPECT_EQ(sweep.code, 2) << sweep.err;
  EXPECT_EQ(slurp(sweep_out), "precious");
  EXPECT_FALSE(fs::exists(sweep_out + ".parts"));
  { std::ofstream(dir / "crt-fig1.claims.md") << "precious"; }
  const CliRun repro = run("reproduce crt-fig1 --quick --quiet --out " + dir.path.string());
  EXPECT_EQ(repro.code, 2) << repro.err;
  EXPECT_NE(repro.err.find("crt-fig1.claims.md"), std::string::npos) << repro.err;
  EXPECT_FALSE(fs::exists(dir / "crt-fig1.h5"));  // refused before computing anything
}

// DIR/index.html that kestrel did not write (issue 49): refused with exit 2 before computing, unchanged; replaced with
// --force; kestrel's own page is then recognised and rewritten by the next reproduction without --force.
TEST(Outputs, ReproduceKeepsAPageItDidNotWrite) {
  TempDir dir("kestrel_page");
  const fs::path page = dir / "index.html";
  { std::ofstream(page) << "<html>mine</html>"; }
  const std::string cmd = "reproduce orf --quick --quiet --out " + dir.path.string();
  const CliRun refused = run(cmd);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find(page.string()), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  EXPECT_EQ(slurp(page), "<html>mine</html>");
  EXPECT_FALSE(fs::exists(dir / "orf.h5"));  // refused before computing anything
  const CliRun forced = run(cmd + " --force");
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(slurp(page).find("kestrel results page"), std::string::npos);
  for (const char* ext : {".h5", ".png", ".claims.json", ".claims.md"}) fs::remove(dir / (std::string("orf") + ext));
  const CliRun again = run(cmd);  // the page is kestrel's now: no --force needed
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(fs::exists(dir / "orf.h5"));
}

TEST(Outputs, OnlyRegularFilesOrNewPathsAreWritten) {
  TempDir dir("kestrel_special");
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& target : {std::string("/dev/full"), fifo, dir.path.string()}) {
    const CliRun r = run(std::string(kTiny) + " --force --out " + target);
    EXPECT_EQ(r.code, 2) << target;
    EXPECT_NE(r.err.find(target), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);  // just the FIFO
}

TEST(Outputs, SigintRemovesTemporaryFiles) {
  TempDir dir("kestrel_sigint");
  // Long enough to be interrupted while its temporary HDF5 file exists (created before computing).
  const CliRun r =
      run("variance --sigma 0.5,1,1.5,2 --dim 64 --points 4096 --pairs 50 --estimators trig,pos,oprf,gerf "
          "--quiet --out " +
              (dir / "x.h5"),
          "timeout -s INT 2 ");
  EXPECT_NE(r.code, 0) << "the run finished before the signal; make it longer";
  EXPECT_FALSE(fs::exists(dir / "x.h5"));
  EXPECT_FALSE(any_temp_left(dir.path));
}

TEST(Outputs, ASecondWriterOfTheSameLockFailsAtOnce) {
  TempDir dir("kestrel_lock");
  const std::string path = dir / "lock";
  kestrel::OutputLock first(path, "the sweep 'x.h5'");
  try {
    kestrel::OutputLock second(path, "the sweep 'x.h5'");
    ADD_FAILURE() << "a second lock was granted";
  } catch (const kestrel::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(::getpid())), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.h5"), std::string::npos) << e.what();
  }
}

TEST(Outputs, ConcurrentSweepOnTheSameOutputFails) {
  TempDir dir("kestrel_concurrent");
  const std::string out = dir / "s.h5";
  const std::string sweep = std::string(KESTREL_CLI) +
                            " sweep --sigma 0.5,1,1.5,2 --dim 64 --points 2048 --pairs 20 --estimators trig,oprf "
                            "--quiet --out " +
                            out;
  ASSERT_EQ(std::system((sweep + " >/dev/null 2>&1 & echo $! > " + (dir / "pid")).c_str()), 0);
  const auto t0 = std::chrono::steady_clock::now();
  while (!fs::exists(out + ".parts/lock") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const CliRun second =
      run("sweep --sigma 0.5,1,1.5,2 --dim 64 --points 2048 --pairs 20 --estimators trig,oprf "
          "--quiet --out " +
          out);
  EXPECT_NE(second.code, 0);
  EXPECT_NE(second.err.find("another kestrel process"), std::string::npos) << second.err;
  std::system(("kill " + slurp(dir / "pid") + " 2>/dev/null; sleep 0.5").c_str());
}

TEST(Outputs, UndefinedDarkIsARecordedResultAndTheSweepCompletes) {
  TempDir dir("kestrel_undefined");
  const std::string out = dir / "s.h5";
  const CliRun r =
      run("sweep --sigma 0.1,0.5,0.8,1 --dim 16 --points 256 --estimators oprf,dark --pairs 1 --json "
          "--out " +
          out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 of 8 results undefined"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("grid point 4/4"), std::string::npos) << r.err;  // progress i/N
  const auto j = nlohmann::json::parse(r.out)["results"];
  ASSERT_EQ(j.size(), 8u);
  int ok_oprf = 0, undefined_dark = 0;
  for (const auto& e : j) {
    if (e["estimator"] == "oprf" && e["status"] == "ok") ++ok_oprf;
    if (e["estimator"] == "dark" && e["status"] == "undefined") {
      ++undefined_dark;
      EXPECT_GE(e["sigma"].get<double>(), 0.8);
      EXPECT_NE(e["reason"].get<std::string>().find("eigenvalue"), std::string::npos) << e;
      EXPECT_FALSE(e.contains("mean_log_var"));
    }
  }
  EXPECT_EQ(ok_oprf, 4);
  EXPECT_EQ(undefined_dark, 2);
  const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  long long status[4] = {};
  double sigma[4] = {}, mlv[4] = {};
  ASSERT_GE(H5LTread_dataset(f, "/sweep/dark/status", H5T_NATIVE_LLONG, status), 0);
  ASSERT_GE(H5LTread_dataset_double(f, "/sweep/dark/sigma", sigma), 0);
  ASSERT_GE(H5LTread_dataset_double(f, "/sweep/dark/mean_log_var", mlv), 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(status[i], sigma[i] >= 0.8 ? 2 : 0) << sigma[i];
    EXPECT_TRUE(std::isfinite(mlv[i]));
  }
  H5Fclose(f);
  // `variance` keeps every other estimator's results as well.
  const CliRun v = run("variance --sigma 0.5,1 --dim 16 --points 256 --pairs 1 --estimators oprf,dark --json --quiet");
  ASSERT_EQ(v.code, 0) << v.err;
  const auto vj = nlohmann::json::parse(v.out)["results"];
  ASSERT_EQ(vj.size(), 4u);
  EXPECT_EQ(vj[0]["status"], "ok");
  EXPECT_EQ(vj[2]["status"], "ok");
  EXPECT_EQ(vj[3]["status"], "undefined");
}

TEST(Outputs, ResultRowsSurviveTheirJsonForm) {
  // A sweep keeps its rows on disk as JSON (parts, resume record): every field must come back, for ok
  // rows with Monte Carlo and for undefined ones (DARK at sigma = 1).
  kestrel::VarianceStudyOptions o;
  o.sigmas = {0.5, 1.0}, o.dim = 16, o.points = 64, o.pairs = 2, o.estimators = {"oprf", "dark"};
  o.mc_reps = 8, o.mc_points = 8;
  const auto results = kestrel::run_variance_study(o);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[3].status, kestrel::Status::Undefined);
  for (const auto& r : results) {
    const kestrel::ResultRow row = kestrel::result_row(r, o);
    EXPECT_EQ(kestrel::row_from_json(nlohmann::json::parse(kestrel::to_json(row).dump())), row) << r.estimator;
  }
  EXPECT_TRUE(kestrel::result_row(results[0], o).mc.has_value());
  EXPECT_EQ(kestrel::result_row(results[0], o).mean_log_var_per_set.size(), 2u);
}

TEST(Outputs, HeavyTailedMonteCarloIsFlagged) {
  // OPRF at sigma = 1, d = 16: the estimate is heavy-tailed and the sample variance is useless; at
  // sigma = 0.2 it is well behaved. Which side each lands on is deterministic (fixed seed); the
  // trusted side passes the 90% rule with ~99.7% expected within 3 SE, so it cannot flip by chance
  // unless the SE model is wrong.
  const CliRun r =
      run("variance --sigma 0.2,1 --dim 16 --points 64 --pairs 1 --estimators oprf --mc 2000 "
          "--mc-points 16 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out)["results"];
  EXPECT_TRUE(j[0]["mc"]["trusted"].get<bool>()) << j[0]["mc"];
  EXPECT_FALSE(j[1]["mc"]["trusted"].get<bool>()) << j[1]["mc"];
  EXPECT_NE(r.err.find("heavy-tailed"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const CliRun table =
      run("variance --sigma 1 --dim 16 --points 64 --pairs 1 --estimators oprf --mc 2000 "
          "--mc-points 16 --quiet");
  EXPECT_NE(table.out.find("MC UNTRUSTED"), std::string::npos) << table.out;
}

// Issue 68 item 4: with --sampler orthogonal the verdict compares the simulation with the exact variance of orthogonal
// blocks (coupled_variance.hpp), not with the iid column it falls below (the issue's case: pos and oprf at sigma 0.25,
// d = M = 16, here on 16 points so that the exact and Monte Carlo entries are the same 256). The simulated means agree
// with that reference (within 0.1 in mean log Var; the iid column is 0.25 or more above); OPRF passes the 3-SE rule.
// PosRF's orthogonal estimate is heavier-tailed at 2000 repetitions (86.7% within 3 SE; 98.4% with 50000, mean -1.5592
// against the exact -1.5594), so it is flagged, and the warning names the orthogonal reference, not the iid column.
TEST(Outputs, MonteCarloIsJudgedAgainstTheSamplerItSimulated) {
  const std::string cmd =
      "variance --sigma 0.25 --dim 16 --features 16 --points 16 --pairs 1 --estimators pos,oprf --mc 2000 --quiet";
  const CliRun ort = run(cmd + " --sampler orthogonal --json"), iid = run(cmd + " --json");
  ASSERT_EQ(ort.code, 0) << ort.err;
  ASSERT_EQ(iid.code, 0) << iid.err;
  const auto o = nlohmann::json::parse(ort.out)["results"], i = nlohmann::json::parse(iid.out)["results"];
  for (std::size_t k = 0; k < 2; ++k) {
    const double mc = o[k]["mc"]["mean_log_var"], exact = o[k]["mc"]["exact_mean_log_var"];
    EXPECT_LT(std::abs(mc - exact), 0.1) << o[k];
    EXPECT_LT(exact, o[k]["mean_log_var"].get<double>() - 0.2) << o[k];  // below the iid column (CRT Thm 4.1)
    EXPECT_DOUBLE_EQ(i[k]["mc"]["exact_mean_log_var"].get<double>(), i[k]["mean_log_var"].get<double>());
  }
  EXPECT_TRUE(o[1]["mc"]["trusted"].get<bool>()) << o[1]["mc"];
  EXPECT_EQ(ort.err.find("oprf"), std::string::npos) << ort.err;
  if (!ort.err.empty()) {
    EXPECT_NE(ort.err.find("within 3 SE of the exact variance of the orthogonal projections simulated"),
              std::string::npos)
        << ort.err;
    EXPECT_NE(ort.err.find("trust the exact variance of the orthogonal projections (the exact(sub) column"),
              std::string::npos)
        << ort.err;
  }
  EXPECT_EQ(run(cmd + " --sampler orthogonal --estimators oprf").out.find("MC UNTRUSTED"), std::string::npos);
  using kestrel::Sampler;
  EXPECT_FALSE(kestrel::mc_reference_is_iid("oprf", Sampler::Orthogonal));
  EXPECT_FALSE(kestrel::mc_reference_is_iid("pos", Sampler::Simplex));
  EXPECT_FALSE(kestrel::mc_reference_is_iid("sderf", Sampler::Iid));
  EXPECT_TRUE(kestrel::mc_reference_is_iid("sderf", Sampler::Orthogonal));
  EXPECT_TRUE(kestrel::mc_reference_is_iid("oprf", Sampler::Structured));
}

// Issue 68 item 4: `kestrel sweep --mc` prints the simulation and its verdict as `kestrel variance` does (the
// heavy-tailed case of HeavyTailedMonteCarloIsFlagged).
TEST(Outputs, SweepReportsUntrustedSimulations) {
  TempDir dir("kestrel_sweep_mc");
  const CliRun r =
      run("sweep --sigma 1 --dim 16 --points 64 --pairs 1 --estimators oprf --mc 2000 --mc-points 16 "
          "--quiet --out " +
          (dir / "s.h5"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MC log Var"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MC UNTRUSTED"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Monte Carlo variance untrusted for oprf sigma=1: fewer than 90% of entries"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

namespace {
// H5Ovisit with the info struct of the installed HDF5 (Debian bookworm has 1.10: H5O_info_t, H5Ovisit2).
#if H5_VERSION_GE(1, 12, 0)
using ObjInfo = H5O_info2_t;
#define KESTREL_H5OVISIT H5Ovisit3
#else
using ObjInfo = H5O_info_t;
#define KESTREL_H5OVISIT H5Ovisit2
#endif
// Every dataset has `description` and `axes`, and a numeric one `units` (issue 37 item 11).
herr_t check_described(hid_t obj, const char* name, const ObjInfo* info, void* bad) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT), type = H5Dget_type(ds);
  const bool text = H5Tget_class(type) == H5T_STRING;
  H5Tclose(type), H5Dclose(ds);
  for (const char* a : {"description", "axes", "units"})
    if ((!text || std::string(a) != "units") && H5Aexists_by_name(obj, name, a, H5P_DEFAULT) <= 0)
      static_cast<std::vector<std::string>*>(bad)->push_back(std::string(name) + ":" + a);
  return 0;
}
}  // namespace

TEST(Outputs, EveryDatasetDescribesItselfAndCountsAreIntegers) {
  TempDir dir("kestrel_describe");
  for (const std::string sub : {"variance --mc 8 --mc-points 4", "sweep"}) {
    const std::string out = dir / (sub.substr(0, 5) + ".h5");
    const CliRun r =
        run(sub + " --sigma 0.5,1 --dim 4 --points 16 --pairs 2 --estimators oprf,trig --quiet --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    std::vector<std::string> bad;
    KESTREL_H5OVISIT(f, H5_INDEX_NAME, H5_ITER_NATIVE, check_described, &bad, H5O_INFO_BASIC);
    EXPECT_TRUE(bad.empty()) << sub << ": " << bad.front();
    const std::string g = sub[0] == 'v' ? "/variance/oprf/" : "/sweep/oprf/";
    for (const char* col : {"n_exact", "n_pairs", "features", "dim", "points", "status"}) {
      H5T_class_t cls{};
      hsize_t dims[1];
      size_t size = 0;
      ASSERT_GE(H5LTget_dataset_info(f, (g + col).c_str(), dims, &cls, &size), 0) << g << col;
      EXPECT_EQ(cls, H5T_INTEGER) << g << col;
    }
    for (const char* a : {"provenance", "git_revision", "command", "options", "library_versions", "seed",
                          "kestrel_version", "created_utc", "layout"})
      EXPECT_GT(H5Aexists(f, a), 0) << sub << " root attribute " << a;
    H5Fclose(f);
  }
  // advise's report (the reproductions are walked in reproduce_test.cpp).
  for (const char* name : {"q.csv", "k.csv", "v.csv"}) {
    std::ofstream f(dir / name);
    for (int i = 0; i < 32; ++i) f << 0.1 * std::sin(i + name[0]) << "," << 0.2 * std::cos(3 * i) << "\n";
  }
  const std::string out = dir / "advice.h5";
  const CliRun r = run("advise --queries " + (dir / "q.csv") + " --keys " + (dir / "k.csv") + " --values " +
                       (dir / "v.csv") + " --budget 16 --draws 16 --rows 16 --quiet --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  std::vector<std::string> bad;
  KESTREL_H5OVISIT(f, H5_INDEX_NAME, H5_ITER_NATIVE, check_described, &bad, H5O_INFO_BASIC);
  H5Fclose(f);
  EXPECT_TRUE(bad.empty()) << "advise: " << bad.front();
}

TEST(Outputs, ClaimsTablesAreValidMarkdownAndSayNotContradicted) {
  TempDir dir("kestrel_claims");
  const CliRun r = run("reproduce orf --quick --quiet --out " + dir.path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not contradicted"), std::string::npos) << r.out;
  std::ifstream md(dir / "orf.claims.md");
  std::string line;
  int rows = 0;
  while (std::getline(md, line)) {
    if (line.empty() || line[0] != '|') continue;
    // Every row has 8 cells: 9 pipes that are not escaped.
    static const std::regex unescaped_pipe(R"((^|[^\\])\|)");
    const auto pipes =
        std::distance(std::sregex_iterator(line.begin(), line.end(), unescaped_pipe), std::sregex_iterator());
    EXPECT_EQ(pipes, 9) << line;
    ++rows;
  }
  EXPECT_GE(rows, 3);
  EXPECT_NE(slurp(dir / "orf.claims.md").find("not contradicted"), std::string::npos);
}
