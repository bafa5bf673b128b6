// End-to-end: `kestrel reproduce all --quick` writes, for every reproduction, an HDF5 file whose every
// dataset is finite and describes itself (description, axes, units), a PNG plot, and a claims summary with finite
// measured values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <tbb/global_control.h>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "estimators/luna/luna.hpp"
#include "experiment.hpp"
#include "io/hdf5.hpp"
#include "io/luna_file.hpp"
#include "kestrel_paths.hpp"
#include "sanitized.hpp"

namespace fs = std::filesystem;

namespace {

struct Walk {
  std::size_t datasets = 0, values = 0, non_finite = 0;
  std::string first_bad;
  std::vector<std::string> undescribed;  // "dataset:attribute" missing (issue 37 item 11)
};

// Every dataset has `description` and `axes`, and a numeric one `units` (H5Writer::describe).
void check_described(hid_t obj, const char* name, hid_t ds, Walk& w) {
  const hid_t type = H5Dget_type(ds);
  const bool text = H5Tget_class(type) == H5T_STRING;
  H5Tclose(type);
  for (const char* a : {"description", "axes", "units"})
    if ((!text || std::string(a) != "units") && H5Aexists_by_name(obj, name, a, H5P_DEFAULT) <= 0)
      w.undescribed.push_back(std::string(name) + ":" + a);
}

herr_t visit(hid_t obj, const char* name, const H5O_info_t* info, void* data) {
  auto* w = static_cast<Walk*>(data);
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
  check_described(obj, name, ds, *w);
  const hid_t space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<double> v(static_cast<std::size_t>(n));
  if (n > 0) H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  ++w->datasets;
  for (double x : v) {
    ++w->values;
    if (!std::isfinite(x)) {
      ++w->non_finite;
      if (w->first_bad.empty()) w->first_bad = name;
    }
  }
  H5Sclose(space);
  H5Dclose(ds);
  return 0;
}

// One reproduction's outputs in a folder (stem = DIR/NAME): finite, self-describing HDF5, a PNG, finite claims.
void check_outputs_of(const fs::path& stem, const std::string& name) {
  const hid_t f = H5Fopen((stem.string() + ".h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0) << name;
  Walk w;
  H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w, H5O_INFO_BASIC);
  H5Fclose(f);
  EXPECT_GT(w.datasets, 0u) << name;
  EXPECT_EQ(w.non_finite, 0u) << name << ": first non-finite dataset " << w.first_bad;
  EXPECT_TRUE(w.undescribed.empty()) << name << ": " << w.undescribed.size() << " missing, first "
                                     << w.undescribed.front();
  std::ifstream png(stem.string() + ".png", std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG") << name;
  std::ifstream cj(stem.string() + ".claims.json");
  const auto j = nlohmann::json::parse(cj);
  EXPECT_FALSE(j["claims"].empty()) << name;
  for (const auto& c : j["claims"]) EXPECT_TRUE(std::isfinite(c["measured"].get<double>())) << name;
  EXPECT_TRUE(fs::exists(stem.string() + ".claims.md")) << name;
}

}  // namespace

// Under ctest the outputs are those of the reproduce_all_quick fixture ($KESTREL_QUICK_RESULTS, the same command, run
// once for this test, the notebooks and the results page); run alone, the test runs the command itself.
static bool complete_quick_run(const std::string& dir) {
  std::ifstream log(dir + ".stdout");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  return text.find("\nall results on one page: ") != std::string::npos;
}

TEST(Reproduce, AllQuickWriteFiniteHdf5PngAndClaims) {
  const char* given = std::getenv("KESTREL_QUICK_RESULTS");
  const bool own = !(given && complete_quick_run(given));
  const fs::path out = own ? fs::temp_directory_path() / ("kestrel_reproduce_" + std::to_string(::getpid())) : given;
  if (own) {
    const std::string cmd = std::string(KESTREL_CLI) + " reproduce all --quick --quiet --out " + out.string() + " > " +
                            (out.string() + ".log") + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << out.string() << ".log";
  }
  EXPECT_TRUE(fs::exists(out / "index.html"));
  for (const auto& e : kestrel::experiments::all_experiments()) check_outputs_of(out / e.name, e.name);
  if (own) {
    fs::remove_all(out);
    fs::remove(out.string() + ".log");
  }
}

// The sanitize tier (scripts/test-sanitize.sh) runs every reproduction but advise at --quick sizes under ASan + UBSan,
// one process each. advise's reproduction (about 170 s at --quick in Release, several times that sanitized) is
// exercised there by AdviseReproduction's smaller in-process checks and the command line's advise tests. In Release
// the reproduce_all_quick fixture runs every reproduction, and this test is skipped.
TEST(Reproduce, EveryReproductionButAdviseQuickUnderTheSanitizers) {
  if (!kestrel::test::kSanitized)
    GTEST_SKIP() << "Release build: Reproduce.AllQuickWriteFiniteHdf5PngAndClaims checks every reproduction";
  const fs::path out = fs::temp_directory_path() / ("kestrel_sanitized_" + std::to_string(::getpid()));
  for (const auto& e : kestrel::experiments::all_experiments()) {
    if (e.name == "advise") continue;
    const std::string log = out.string() + "." + e.name + ".log";
    const std::string cmd = std::string(KESTREL_CLI) + " reproduce " + e.name + " --quick --quiet --out " +
                            out.string() + " > " + log + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << e.name << ": see " << log;
    check_outputs_of(out / e.name, e.name);
    fs::remove(log);
  }
  fs::remove_all(out);
}

// The second protocol of crt-fig2 and derf-fig2 (the image pipeline most consistent with both papers,
// docs/mnist-pipelines.md): finite HDF5 recording the protocol, and image claims that name the pipeline.
TEST(Reproduce, ImagePipelineProtocolQuick) {
  const std::string protocol = "standardize/bilinear";
  for (const std::string name : {"crt-fig2", "derf-fig2"}) {
    const fs::path out = fs::temp_directory_path() / ("kestrel_protocol_" + std::to_string(::getpid()));
    const std::string cmd = std::string(KESTREL_CLI) + " reproduce " + name + " --quick --quiet --protocol " +
                            protocol + " --out " + out.string() + " > " + (out.string() + ".log") + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << out.string() << ".log";
    const hid_t f = H5Fopen((out / (name + ".h5")).string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0) << name;
    Walk w;
    H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w, H5O_INFO_BASIC);
    EXPECT_GT(H5Lexists(f, "/mnist", H5P_DEFAULT), 0) << name;
    EXPECT_EQ(H5Lexists(f, "/mnist-center", H5P_DEFAULT), 0) << name;  // the default protocol's extra panels
    H5Fclose(f);
    EXPECT_EQ(w.non_finite, 0u) << name << ": first non-finite dataset " << w.first_bad;
    EXPECT_TRUE(w.undescribed.empty()) << name << ": " << w.undescribed.front();
    std::ifstream cj((out / (name + ".claims.json")).string());
    const auto j = nlohmann::json::parse(cj);
    EXPECT_EQ(j.dump().find("mnist-standardize"), std::string::npos) << name;
    std::size_t named = 0;
    for (const auto& c : j["claims"]) {
      EXPECT_TRUE(std::isfinite(c["measured"].get<double>())) << name;
      if (c["statement"].get<std::string>().find("mnist") != std::string::npos)
        named += c["note"].get<std::string>().find("pipeline " + protocol) != std::string::npos;
    }
    EXPECT_GE(named, 3u) << name;
    std::ifstream md((out / (name + ".claims.md")).string());
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("Protocol `" + protocol + "`"), std::string::npos) << name;
    fs::remove_all(out);
    fs::remove(out.string() + ".log");
  }
}

// An unknown protocol is refused with one line naming it and the known ones, exit code 2, before any file is written.
TEST(Reproduce, UnknownProtocolIsRejected) {
  const auto& e = kestrel::experiments::find_experiment("crt-fig2");
  EXPECT_EQ(kestrel::experiments::resolve_protocol(e, ""), "kestrel");
  EXPECT_THROW(kestrel::experiments::resolve_protocol(e, "standardise/bilinear"), kestrel::InvalidArgument);
  const fs::path out = fs::temp_directory_path() / ("kestrel_badprotocol_" + std::to_string(::getpid()));
  const std::string cmd = std::string(KESTREL_CLI) + " reproduce crt-fig2 --quick --quiet --protocol nope --out " +
                          out.string() + " > " + (out.string() + ".log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream log(out.string() + ".log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("'nope'"), std::string::npos) << text;
  EXPECT_NE(text.find("standardize/bilinear"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_FALSE(fs::exists(out / "crt-fig2.h5"));
  fs::remove_all(out);
  fs::remove(out.string() + ".log");
}

TEST(Reproduce, UnknownNameIsRejected) {
  EXPECT_THROW(kestrel::experiments::find_experiment("crt-fig9"), kestrel::InvalidArgument);
  EXPECT_EQ(kestrel::experiments::find_experiment("hrf-fig5").name, "hrf-fig2");
}

// `kestrel reproduce attention --quick` alone: finite HDF5 with the error table and the timing group,
// PNG, and the positivity claim holding (positive estimators never give a normaliser <= 0).
TEST(Reproduce, AttentionQuick) {
  const fs::path out = fs::temp_directory_path() / ("kestrel_attention_" + std::to_string(::getpid()));
  const std::string cmd = std::string(KESTREL_CLI) + " reproduce attention --quick --quiet --out " + out.string() +
                          " > " + (out.string() + ".log") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << out.string() << ".log";
  const hid_t f = H5Fopen((out / "attention.h5").string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  Walk w;
  H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w, H5O_INFO_BASIC);
  for (const char* path :
       {"/iso-1/oprf/rel_error_Y", "/aniso/dark/rel_error_normaliser", "/mnist/trig/frac_negative_weights",
        "/timing/exact_seconds", "/timing/approx_seconds_M256", "/timing/crossover_L_fit"})
    EXPECT_GT(H5Lexists(f, path, H5P_DEFAULT), 0) << path;
  H5Fclose(f);
  EXPECT_EQ(w.non_finite, 0u) << "first non-finite dataset " << w.first_bad;
  std::ifstream png((out / "attention.png").string(), std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  std::ifstream cj((out / "attention.claims.json").string());
  const auto j = nlohmann::json::parse(cj);
  bool positivity = false;
  for (const auto& c : j["claims"])
    if (c["statement"].get<std::string>().find("never give a non-positive") != std::string::npos)
      positivity = c["holds"].get<bool>();
  EXPECT_TRUE(positivity);
  fs::remove_all(out);
  fs::remove(out.string() + ".log");
}

// `kestrel reproduce luna --quick` in-process with 1 and 2 threads: identical results and trained maps (training is
// deterministic from the seed), and the saved maps load back as valid LUNA maps.
TEST(Reproduce, LunaQuickIsDeterministicAndItsMapsLoadBack) {
  const auto& e = kestrel::experiments::find_experiment("luna");
  const fs::path dir = fs::temp_directory_path() / ("kestrel_luna_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> files;
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    kestrel::experiments::Options opt;
    opt.quick = true;
    files.push_back((dir / ("luna" + std::to_string(threads) + ".h5")).string());
    kestrel::H5Writer h5(files.back());
    std::vector<kestrel::experiments::Claim> claims;
    e.run(opt, h5, claims);
    h5.commit();
    EXPECT_EQ(claims.size(), 4u);
  }
  const kestrel::H5Reader a(files[0]), b(files[1]);
  for (const std::string ds :
       {"/banknote/kernel_log_rel_mse", "/banknote/accuracy", "/banknote/task_fit_objective_final",
        "/banknote/maps/task/ungated/M16/W", "/banknote/maps/kernel/gated/M16/coef"}) {
    const arma::mat x = a.read_mat(ds);
    EXPECT_TRUE(arma::approx_equal(x, b.read_mat(ds), "absdiff", 0.0)) << ds;
  }
  const kestrel::LunaParams p = kestrel::load_luna(files[0], "/banknote/maps/task/ungated/M16");
  EXPECT_EQ(p.M(), 16u);
  EXPECT_EQ(p.d(), 4u);
  // Training moved the map away from its starting point (the seeded RFF initialisation).
  const kestrel::LunaParams init = kestrel::luna_init(kestrel::LunaVariant::Ungated, 4, 16, {.seed = 1000});
  EXPECT_GT(arma::abs(p.W - init.W).max(), 0.0);
  fs::remove_all(dir);
}

// --protocol: the first protocol is the default, an unknown one (or one for an experiment without any) is refused
// before anything is written, and `all` takes none.
TEST(Reproduce, ProtocolsAreCheckedBeforeAnyFileIsWritten) {
  using kestrel::experiments::find_experiment;
  using kestrel::experiments::resolve_protocol;
  EXPECT_EQ(resolve_protocol(find_experiment("hrf-fig6"), ""), "h3");
  EXPECT_EQ(resolve_protocol(find_experiment("hrf-fig6"), "radius"), "radius");
  EXPECT_EQ(resolve_protocol(find_experiment("crt-fig1"), ""), "");
  EXPECT_THROW(resolve_protocol(find_experiment("hrf-fig6"), "h4"), kestrel::InvalidArgument);
  EXPECT_THROW(resolve_protocol(find_experiment("crt-fig1"), "h3"), kestrel::InvalidArgument);
  const fs::path out = fs::temp_directory_path() / ("kestrel_protocol_" + std::to_string(::getpid()));
  for (const std::string args : {"hrf-fig6 --protocol h4", "crt-fig1 --protocol h3", "all --protocol radius"}) {
    const std::string cmd = std::string(KESTREL_CLI) + " reproduce " + args + " --quick --quiet --out " + out.string() +
                            " > /dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

// --rows (issue 35): 0, more than the reproduction's L, a non-integer, or a reproduction without a row sample exit 2
// before any file is written; the quick attention-variance has L = 64 query rows.
TEST(Reproduce, RowsAreCheckedBeforeAnyFileIsWritten) {
  EXPECT_EQ(kestrel::experiments::find_experiment("attention-variance").query_rows({.quick = true}), 64u);
  EXPECT_FALSE(kestrel::experiments::find_experiment("crt-fig1").query_rows);
  const fs::path out = fs::temp_directory_path() / ("kestrel_rows_" + std::to_string(::getpid()));
  for (const std::string args :
       {"attention-variance --rows 0", "attention-variance --rows 65", "attention-variance --rows 2.5",
        "attention-variance --rows -1", "crt-fig1 --rows 5"}) {
    const std::string cmd = std::string(KESTREL_CLI) + " reproduce " + args + " --quick --quiet --out " + out.string() +
                            " > /dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

// The protocols that `reproduce all` does not run: quick runs with finite HDF5, a PNG and the protocol recorded.
TEST(Reproduce, NonDefaultProtocolsRunQuick) {
  const fs::path out = fs::temp_directory_path() / ("kestrel_protocols_" + std::to_string(::getpid()));
  for (const auto& e : kestrel::experiments::all_experiments())
    for (std::size_t p = 1; p < e.protocols.size(); ++p) {
      const std::string& name = e.protocols[p].name;
      std::string leaf = name;  // a protocol name may hold '/' (standardize/bilinear)
      std::replace(leaf.begin(), leaf.end(), '/', '_');
      const fs::path dir = out / (e.name + "_" + leaf);
      const std::string cmd = std::string(KESTREL_CLI) + " reproduce " + e.name + " --protocol " + name +
                              " --quick --quiet --out " + dir.string() + " > " + out.string() + ".log 2>&1";
      fs::create_directories(out);
      ASSERT_EQ(std::system(cmd.c_str()), 0) << e.name << " " << name << ": see " << out.string() << ".log";
      const hid_t f = H5Fopen((dir / (e.name + ".h5")).string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      ASSERT_GE(f, 0);
      Walk w;
      H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w, H5O_INFO_BASIC);
      H5Fclose(f);
      EXPECT_GT(w.datasets, 0u) << e.name << " " << name;
      EXPECT_EQ(w.non_finite, 0u) << e.name << " " << name << ": " << w.first_bad;
      EXPECT_TRUE(fs::exists(dir / (e.name + ".png"))) << e.name << " " << name;
      std::ifstream cj((dir / (e.name + ".claims.json")).string());
      const auto j = nlohmann::json::parse(cj);
      EXPECT_EQ(j["provenance"]["options"]["protocol"].get<std::string>(), name);
      EXPECT_FALSE(j["claims"].empty()) << e.name << " " << name;
    }
  fs::remove_all(out);
  fs::remove(out.string() + ".log");
}

// Issue #38: the claims tables show formulas as written (Markdown: '|', '<', '*', '_' escaped; JSON: unchanged) and
// numbers with 4 significant digits, never 1159335400523971821568.000; claims.json records the run's wall time.
TEST(Reproduce, ClaimsTablesEscapeFormulasAndRoundNumbers) {
  using kestrel::experiments::format_number;
  EXPECT_EQ(format_number(1159335400523971821568.0), "1.159e+21");
  EXPECT_EQ(format_number(0.000314159), "0.0003142");
  EXPECT_EQ(format_number(12.3456), "12.35");
  EXPECT_EQ(format_number(-3.0), "-3");
  EXPECT_EQ(format_number(250000.0), "250000");
  EXPECT_EQ(format_number(1e7), "1e+07");
  const std::string statement = "|x+y|^2 < 100 and a*b_c > `d`";
  const kestrel::experiments::Experiment e{
      "escape-check", "a | b < c",
      [&](const kestrel::experiments::Options&, kestrel::H5Writer&, std::vector<kestrel::experiments::Claim>& claims) {
        claims.push_back({"CRT 5.1", statement, "q | r", "<", 1e300, 1159335400523971821568.0, 0, "s", "n <b>"});
      }};
  const fs::path dir = fs::temp_directory_path() / ("kestrel_escape_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  kestrel::experiments::reproduce(e, {.quick = true}, dir.string(), "test");
  std::ifstream md_file(dir / "escape-check.claims.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("\\|x+y\\|^2 \\< 100 and a\\*b\\_c \\> \\`d\\`"), std::string::npos) << md;
  EXPECT_NE(md.find("| q \\| r |"), std::string::npos) << md;
  EXPECT_NE(md.find("| \\< 1e+300 | 1.159e+21 |"), std::string::npos) << md;
  EXPECT_NE(md.find("n \\<b\\>"), std::string::npos) << md;
  EXPECT_EQ(md.find("1159335400523971821568"), std::string::npos) << md;
  // Every table row has exactly the 9 unescaped pipes of 8 cells.
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| CRT", 0) != 0) continue;
    std::size_t pipes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(pipes, 9u) << line;
  }
  std::ifstream js(dir / "escape-check.claims.json");
  const auto j = nlohmann::json::parse(js);
  EXPECT_EQ(j["claims"][0]["statement"], statement);
  EXPECT_TRUE(j["claims"][0]["uncertainty"].is_null());  // no SE given: null, not NaN (invalid JSON)
  ASSERT_TRUE(j.contains("seconds"));
  EXPECT_GE(j["seconds"].get<double>(), 0.0);
  fs::remove_all(dir);
}
