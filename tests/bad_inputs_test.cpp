// Bad inputs, round two (issue 37): every entry point that writes refuses to replace a file that appeared while it
// computed, unwritable or empty outputs fail before computing with the system's reason, every flag refuses a value
// that is not a boolean, configs are read strictly, points files say what they look like, sweeps name the options
// that differ, out-of-context options are refused alike and SIGINT says how to resume. Each test drives every CLI
// subcommand it applies to; python/tests/test_bad_inputs.py drives the Python functions through the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "io/output.hpp"
#include "kestrel_paths.hpp"

extern char** environ;

namespace fs = std::filesystem;
using kestrel::test::CliRun;
using kestrel::test::run;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const char* stem) : path(kestrel::test::temp_dir(stem)) {}
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Small queries, keys and values for `kestrel advise` in dir (CSV, 48 tokens, d = 4).
std::string advise_inputs(const TempDir& dir) {
  for (const char* name : {"q.csv", "k.csv", "v.csv"}) {
    std::ofstream f(dir / name);
    for (int i = 0; i < 48; ++i)
      for (int j = 0; j < 4; ++j) f << 0.1 * std::sin(1.0 + i * 4 + j + name[0]) << (j == 3 ? "\n" : ",");
  }
  return "advise --queries " + (dir / "q.csv") + " --keys " + (dir / "k.csv") + " --values " + (dir / "v.csv") +
         " --budget 16 --draws 16 --rows 16 --estimators pos --samplers iid --quiet";
}

// Every command that writes, as "ARGS --out " (the caller appends the path).
std::vector<std::pair<std::string, std::string>> writers(const TempDir& dir) {
  return {{"variance", "variance --sigma 0.5 --dim 8 --points 256 --pairs 3 --estimators oprf,gerf --quiet --out "},
          {"sweep", "sweep --sigma 0.5 --dim 8 --points 128 --pairs 1 --estimators oprf --quiet --out "},
          {"advise", advise_inputs(dir) + " --out "},
          {"reproduce", "reproduce crt-fig1 --quick --quiet --out "}};
}

struct Outcome {
  int code;
  std::string err;
};

// Runs the shell command lines at the same moment (one thread each) and returns their exit codes and stderr.
std::vector<Outcome> run_together(const std::vector<std::string>& commands, const TempDir& dir) {
  std::vector<std::thread> threads;
  std::vector<int> codes(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i)
    threads.emplace_back([&, i] {
      const int s = std::system((commands[i] + " >/dev/null 2>" + dir / ("err" + std::to_string(i))).c_str());
      codes[i] = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
    });
  for (auto& t : threads) t.join();
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < commands.size(); ++i) out.push_back({codes[i], slurp(dir / ("err" + std::to_string(i)))});
  return out;
}

}  // namespace

// Item 1: the final step refuses a target that appeared meanwhile, with the up-front check's error.
TEST(BadInputs, PublishRefusesATargetThatAppearedMeanwhile) {
  TempDir dir("kestrel_publish");
  const std::string target = dir / "r.h5", tmp = kestrel::temp_beside(target);
  { std::ofstream(target) << "first"; }
  { std::ofstream(tmp) << "second"; }
  std::string upfront;
  try {
    kestrel::check_output(target, false);
  } catch (const kestrel::InvalidArgument& e) {
    upfront = e.what();
  }
  ASSERT_FALSE(upfront.empty());
  try {
    kestrel::publish_output(tmp, target, false);
    ADD_FAILURE() << "replaced without force";
  } catch (const kestrel::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), upfront);
  }
  EXPECT_EQ(slurp(target), "first");
  EXPECT_FALSE(fs::exists(tmp));  // the loser's temporary file is gone
  { std::ofstream(tmp) << "second"; }
  kestrel::publish_output(tmp, target, true);  // --force keeps its meaning
  EXPECT_EQ(slurp(target), "second");
}

// Item 1, end to end: two runs of every writing command with the same --out (and different seeds) started at once:
// one writes, the other fails with one line (exit 2 and the "exists" error; a sweep may instead meet the first one's
// lock), its file is not replaced, and no temporary file is left behind.
TEST(BadInputs, TwoWritersOfOneOutputStartedTogether) {
  TempDir dir("kestrel_two_writers");
  for (const auto& [name, args] : writers(dir)) {
    const std::string out = dir / (name == "reproduce" ? "repro" : name + ".h5");
    const std::string cmd = std::string(KESTREL_CLI) + " " + args + out;
    const auto r = run_together({cmd + " --seed 1", cmd + " --seed 2"}, dir);
    const int wins = (r[0].code == 0) + (r[1].code == 0);
    EXPECT_EQ(wins, 1) << name << ": " << r[0].err << " | " << r[1].err;
    for (const auto& o : r)
      if (o.code != 0) {
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << name << ": " << o.err;
        const bool locked = name == "sweep" && o.err.find("another kestrel process") != std::string::npos;
        // A sweep that starts after the other finished meets a finished sweep with another --seed (item 7).
        const bool finished =
            name == "sweep" && o.err.find("holds a finished sweep with other options") != std::string::npos;
        if (!locked) {
          EXPECT_EQ(o.code, 2) << name << ": " << o.err;
          EXPECT_NE(o.err.find(finished ? "pass --force to replace it" : "exists; pass --force to replace it"),
                    std::string::npos)
              << name << ": " << o.err;
        }
      }
    const fs::path where = name == "reproduce" ? fs::path(out) : dir.path;
    for (const auto& e : fs::directory_iterator(where))
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
    if (name == "sweep") continue;  // two sweeps of one output also share its parts: the lock decides
    // With --force both succeed: the meaning of --force is kept.
    const auto f = run_together({cmd + " --seed 1 --force", cmd + " --seed 2 --force"}, dir);
    EXPECT_EQ(f[0].code, 0) << name << ": " << f[0].err;
    EXPECT_EQ(f[1].code, 0) << name << ": " << f[1].err;
  }
}

// Items 4 and 5: unwritable and empty outputs fail at once (before computing) with exit 2, one line naming the path
// and the system's reason, in every command.
TEST(BadInputs, UnwritableOutputsFailBeforeComputing) {
  TempDir dir("kestrel_unwritable");
  { std::ofstream(dir / "file") << "x"; }
  const std::vector<std::pair<std::string, std::string>> bad = {{"/proc/x.h5", "No such file or directory"},
                                                                {dir / "file/x.h5", "Not a directory"},
                                                                {dir / "missing/x.h5", "No such file or directory"},
                                                                {"''", "empty"}};
  for (const auto& [name, args] : writers(dir)) {
    for (const auto& [path, reason] : bad) {
      // Large sizes: a run that computed before failing would take minutes.
      std::string big = args;
      if (name == "variance" || name == "sweep")
        big = std::regex_replace(big, std::regex("--points \\d+"), "--points 8192");
      const auto t0 = std::chrono::steady_clock::now();
      const CliRun r = run(big + path);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(r.code, 2) << name << " " << path << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << name << " " << path << ": " << r.err;
      EXPECT_NE(r.err.find(reason), std::string::npos) << name << " " << path << ": " << r.err;
      if (path != "''") EXPECT_NE(r.err.find(path.substr(0, path.size() - 5)), std::string::npos) << r.err;
      EXPECT_LT(secs, 5.0) << name << " " << path << ": computed before failing?";
    }
  }
  EXPECT_FALSE(fs::exists(dir / "missing"));
  EXPECT_EQ(slurp(dir / "file"), "x");
}

// Every flag of every subcommand (and the global ones) refuses a value that is not a boolean.
TEST(BadInputs, EveryFlagRefusesANonBooleanValue) {
  const std::regex flag_line(R"(^\s+(?:-\w,)?(--[a-z0-9-]+)\s{2,}\S)");
  std::set<std::string> seen;
  for (const std::string sub : {"", "variance", "sweep", "advise", "reproduce", "estimators", "datasets"}) {
    const CliRun help = run(sub + " --help");
    ASSERT_EQ(help.code, 0) << sub;
    std::stringstream ss(help.out);
    std::string line;
    int flags = 0;
    while (std::getline(ss, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, flag_line) || m[1] == "--help" || m[1] == "--version") continue;
      ++flags;
      const std::string f = m[1];
      seen.insert(f);
      const CliRun r = run(sub + " " + f + "=2");
      EXPECT_EQ(r.code, 2) << sub << " " << f << "=2: " << r.out << r.err;
      EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("got '2'"), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    if (sub == "variance" || sub == "sweep" || sub == "advise" || sub == "reproduce") EXPECT_GT(flags, 0) << sub;
  }
  for (const char* f : {"--full-curve", "--no-timing", "--halve-real", "--force", "--json", "--quick", "--quiet"})
    EXPECT_TRUE(seen.count(f)) << f << " not found in any --help";
  // Booleans spelled out are still accepted.
  EXPECT_EQ(run("variance --sigma 0.5 --dim 4 --points 16 --pairs 1 --estimators oprf --quiet --halve-real=false").code,
            0);
}

// Item 2: a config with nothing for the command that reads it is an error naming the sections found, and the other
// command's section is validated value by value whichever command reads the file.
TEST(BadInputs, ConfigsAreStrictForBothCommands) {
  TempDir dir("kestrel_config");
  const std::string run_args = " --dim 4 --points 16 --pairs 1 --estimators oprf --quiet --config ";
  const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> cases = {
      {"sweep", "[variance]\nsigma = [0.5]\n", {"no [sweep] section", "sections found: [variance]"}},
      {"variance", "[sweep]\nsigma = [0.5]\n", {"no [variance] section", "sections found: [sweep]"}},
      {"variance", "# nothing\n", {"no [variance] section", "sections found: none"}},
      {"sweep", "[sweep]\nsigma = [0.5]\n[variance]\nsigma = [-1]\n", {"c.toml:4:1: sigma", "'-1'"}},
      {"variance", "[variance]\nsigma = [0.5]\n[sweep]\ndim = [4, 0]\n", {"c.toml:4:1: dim", "'0'"}},
      {"variance", "[variance]\nsigma = [0.5]\n[sweep]\nestimators = [\"oprff\"]\n", {"did you mean 'oprf'"}},
      // Item 9: `out` in a config is refused as a command-line option also among other keys (not "--out is required").
      {"sweep", "[sweep]\nsigma = [0.5]\nout = \"x.h5\"\n", {"'out' is a command-line option"}},
  };
  for (const auto& [cmd, text, words] : cases) {
    { std::ofstream(dir / "c.toml") << text; }
    const std::string out = cmd == "sweep" && text.find("out =") == std::string::npos ? " --out " + (dir / "s.h5") : "";
    const CliRun r = run(cmd + run_args + (dir / "c.toml") + out);
    EXPECT_EQ(r.code, 2) << cmd << " with " << text << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << text << " -> " << r.err;
    EXPECT_FALSE(fs::exists(dir / "s.h5"));
  }
  // Both sections, both valid: each command reads its own.
  { std::ofstream(dir / "c.toml") << "[variance]\nsigma = 0.5\n[sweep]\nsigma = [0.5, 1]\n"; }
  EXPECT_EQ(run("variance" + run_args + (dir / "c.toml")).code, 0);
  EXPECT_EQ(run("sweep" + run_args + (dir / "c.toml") + " --out " + (dir / "s.h5")).code, 0);
}

// Item 9 (first part): a repeated option is named with both values, not CLI11's "At Most 1 required but received 2".
TEST(BadInputs, ARepeatedOptionIsNamedWithBothValues) {
  for (const std::string sub : {"variance", "sweep --out x.h5", "advise --queries q.csv --keys k.csv"}) {
    const CliRun r = run(sub + " --seed 1 --seed 2");
    EXPECT_EQ(r.code, 2) << sub << ": " << r.err;
    EXPECT_NE(r.err.find("given twice ('"), std::string::npos) << sub << ": " << r.err;
    EXPECT_EQ(r.err.find("At Most"), std::string::npos) << sub << ": " << r.err;
  }
  const CliRun r = run("variance --sigma 0.5 --seed 1 --seed 2");
  EXPECT_NE(r.err.find("--seed is given twice ('1' and '2')"), std::string::npos) << r.err;
}

// Item 3 (command line): rows whose features underflow or overflow get one warning line; unit-scale rows none.
TEST(BadInputs, VarianceNamesRowsWithDegenerateFeatures) {
  const CliRun r = run("variance --sigma 0.5,12 --dim 8 --points 32 --pairs 1 --estimators pos,oprf --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("numerically degenerate features for pos sigma=12"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("sigma=0.5"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const CliRun ok = run("variance --sigma 0.5 --dim 8 --points 32 --pairs 1 --estimators pos,oprf --quiet");
  EXPECT_EQ(ok.err.find("degenerate"), std::string::npos) << ok.err;
}

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// n points of dimension d as CSV rows (sep between fields, dec as the decimal separator), small values.
std::string points_text(int n, int d, const std::string& sep = ",", char dec = '.') {
  std::string s;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      std::string v = fmt::format("{:.6f}", 0.3 * std::sin(1.0 + 7.0 * i + j));
      std::replace(v.begin(), v.end(), '.', dec);
      s += v + (j + 1 == d ? "\n" : sep);
    }
  return s;
}

// Expects exit code 2, one line on stderr holding every word, none of `absent`, and no file in `dir` named `out`.
void expect_refused(const CliRun& r, const std::string& what, const std::vector<std::string>& words,
                    const std::vector<std::string>& absent = {}) {
  EXPECT_EQ(r.code, 2) << what << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
  for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << what << ": '" << w << "' in " << r.err;
  for (const auto& w : absent) EXPECT_EQ(r.err.find(w), std::string::npos) << what << ": '" << w << "' in " << r.err;
}

}  // namespace

// Item 6 (and item 9's "N fields, expected M"): a CSV with a UTF-8 byte-order mark is read as without it; files with
// decimal commas or binary files are named as what they look like, through every command that reads points files
// (variance and sweep --x-file/--y-file, advise --queries/--keys/--values), with exit 2 and no output.
TEST(BadInputs, PointsFilesSayWhatTheyLookLike) {
  TempDir dir("kestrel_points_files");
  const std::string plain = "x1,x2,x3\n" + points_text(40, 3);
  write(dir / "plain.csv", plain);
  write(dir / "bom.csv", "\xEF\xBB\xBF" + plain);
  const std::string var = "variance --regime file --sigma 0.5 --estimators oprf --json --quiet --x-file ";
  const CliRun a = run(var + (dir / "plain.csv")), b = run(var + (dir / "bom.csv"));
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["results"], nlohmann::json::parse(b.out)["results"]);
  const std::string adv = " --budget 16 --draws 8 --rows 8 --estimators pos --samplers iid --quiet --json";
  EXPECT_EQ(run("advise --queries " + (dir / "bom.csv") + " --keys " + (dir / "bom.csv") + adv).code, 0);

  write(dir / "semicolon.csv", points_text(40, 3, ";", ','));
  write(dir / "spaces.txt", points_text(40, 3, " ", ','));
  std::string bytes;
  for (int i = 0; i < 1024; ++i) bytes += static_cast<char>((i * 37 + 11) % 256);
  write(dir / "binary.csv", bytes);
  write(dir / "array.csv", std::string("\x93NUMPY\x01\x00", 8) + "{'descr': '<f8'}");
  write(dir / "hdf5.csv", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(64, '\0'));
  write(dir / "utf16.csv", std::string("\xff\xfe", 2) + std::string("1\0,\0002\0", 6));
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"semicolon.csv", {"semicolon.csv: line 1", "decimal commas", "'.' as the decimal separator"}},
      {"spaces.txt", {"spaces.txt: line 1", "decimal commas"}},
      {"binary.csv", {"binary.csv: not a text points file", "a binary file (byte"}},
      {"array.csv", {"array.csv", "NumPy .npy array", "name ending in .npy"}},
      {"hdf5.csv", {"hdf5.csv", "an HDF5 file", "hdf5.csv:/path/to/dataset"}},
      {"utf16.csv", {"utf16.csv", "UTF-16"}}};
  const std::string good = dir / "plain.csv";
  for (const auto& [file, words] : bad) {
    const std::string f = dir / file, out = dir / "out.h5";
    const std::vector<std::pair<std::string, std::string>> entry_points = {
        {"variance --x-file", "variance --regime file --sigma 0.5 --quiet --x-file " + f + " --out " + out},
        {"variance --y-file",
         "variance --regime file --sigma 0.5 --quiet --x-file " + good + " --y-file " + f + " --out " + out},
        {"sweep", "sweep --regime file --sigma 0.5 --quiet --x-file " + f + " --out " + out},
        {"advise --queries", "advise --queries " + f + " --keys " + good + adv + " --out " + out},
        {"advise --values", "advise --queries " + good + " --keys " + good + " --values " + f + adv + " --out " + out}};
    for (const auto& [where, args] : entry_points) {
      expect_refused(run(args), where + " " + file, words, {"fields, expected"});
      EXPECT_FALSE(fs::exists(out)) << where << " " << file;
    }
  }
}

// Item 7: a finished sweep that other options cannot extend, and an interrupted one they cannot resume, are refused
// naming each differing option with both values and saying what --force discards; the file and the parts are kept.
// With --force the other options' points are discarded and the run completes.
TEST(BadInputs, SweepsThatCannotBeExtendedOrResumedNameTheDifferences) {
  TempDir dir("kestrel_sweep_differs");
  const std::string out = dir / "s.h5";
  const std::string sweep = "sweep --sigma 0.5,1 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet --out " + out;
  ASSERT_EQ(run(sweep).code, 0);
  const std::string before = slurp(out);
  expect_refused(run(sweep + " --seed 2 --kernel gaussian"), "extend",
                 {"holds a finished sweep with other options", "--kernel 'gaussian' here, 'softmax' there",
                  "--seed 2 here, 1 there", "pass --force to replace it (discarding its 2 finished grid points)"});
  EXPECT_EQ(slurp(out), before);
  // More grid values with the same options extend it, as before.
  EXPECT_EQ(run("sweep --sigma 0.5,1,2 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet --out " + out).code, 0);

  const std::string out2 = dir / "t.h5";
  const std::string sweep2 = "sweep --sigma 0.5,1,2 --dim 4 --points 32 --pairs 1 --quiet --out " + out2;
  EXPECT_NE(run(sweep2 + " --estimators oprf", "KESTREL_TEST_SWEEP_STOP=after=1 ").code,
            0);  // interrupted after one point
  ASSERT_TRUE(fs::exists(out2 + ".parts"));
  expect_refused(run(sweep2 + " --estimators pos"), "resume",
                 {"holds 1 finished grid points of an interrupted sweep with other options",
                  "--estimators 'pos' here, 'oprf' there", "pass --force to discard them"});
  EXPECT_TRUE(fs::exists(out2 + ".parts"));
  EXPECT_FALSE(fs::exists(out2));
  const CliRun forced = run(sweep2 + " --estimators pos --force");
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_FALSE(fs::exists(out2 + ".parts"));
}

// Item 9: the memory limit says where it came from, the file regime's room is a number, and options that nothing
// reads in the given context are refused alike (command line and config file, variance, sweep and advise).
TEST(BadInputs, OutOfContextOptionsAndOtherUnclearMessages) {
  TempDir dir("kestrel_context");
  const CliRun mem = run("variance --sigma 0.5 --dim 4 --points 16 --quiet", "KESTREL_MEMORY_LIMIT=1000 ");
  expect_refused(mem, "memory", {"more than the limit of 1.0 kB set by KESTREL_MEMORY_LIMIT=1000"}, {"this machine"});
  write(dir / "x.csv", points_text(40, 3));
  expect_refused(run("variance --regime file --x-file " + (dir / "x.csv") + " --points 30 --quiet"), "room",
                 {"has room for 20 disjoint points per set"}, {"  "});

  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--pixel-scale 255", {"--pixel-scale", "an image regime", "the regime is 'normal'"}},
      {"--preprocess center", {"--preprocess", "an image regime", "the regime is 'normal'"}},
      {"--resize bilinear", {"--resize", "the regime is 'normal'"}},
      {"--data-dir " + dir.path.string(), {"--data-dir", "the regime is 'normal'"}},
      {"--regime mnist --preprocess standardize --pixel-scale 255",
       {"--pixel-scale", "--preprocess raw or center", "the preprocessing is 'standardize'"}},
      {"--spectrum rank:2", {"--spectrum", "--regime aniso"}},
      {"--clusters 3", {"--clusters", "--regime clustered"}},
      {"--cluster-radius 2", {"--cluster-radius", "--regime clustered"}},
      {"--regime clustered --clusters 100", {"--clusters: 100 clusters is more than --points 32"}},
      {"--x-file " + (dir / "x.csv"), {"--x-file", "--regime file"}},
      {"--values ones", {"--values", "--quantity kc or attention"}},
      {"--value-dim 3", {"--value-dim", "--quantity kc or attention"}},
      {"--estimators oprf --sampler orthogonal", {"--sampler", "Monte Carlo", "--mc is 0"}},
      {"--estimators oprf --mc-points 4", {"--mc-points", "Monte Carlo", "--mc is 0"}}};
  for (const std::string cmd : {"variance", "sweep"})
    for (const auto& [args, words] : cases) {
      const std::string out = dir / "o.h5";
      expect_refused(run(cmd + " --sigma 0.5 --dim 4 --points 32 --pairs 1 --quiet " + args + " --out " + out),
                     cmd + " " + args, words);
      EXPECT_FALSE(fs::exists(out)) << cmd << " " << args;
    }
  write(dir / "c.toml", "[sweep]\nsigma = [0.5]\npreprocess = \"center\"\n");
  expect_refused(run("sweep --dim 4 --points 32 --quiet --config " + (dir / "c.toml") + " --out " + (dir / "o.h5")),
                 "config", {"c.toml:3:1: preprocess", "an image regime"});
  // advise: options of the other quantity.
  const std::string adv = advise_inputs(dir);
  for (const auto& [args, words] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"--pairs 100", {"--pairs '100'", "quantity kernel", "the quantity is 'attention'"}},
           {"--kernel gaussian", {"--kernel 'gaussian'", "quantity kernel"}},
           {"--quantity kernel --metric tv", {"--metric 'tv'", "quantity attention", "the quantity is 'kernel'"}},
           {"--quantity kernel --draws 8", {"--draws '8'", "quantity attention"}},
           {"--quantity kernel --time-budget 5", {"--time-budget '5'", "quantity attention"}},
           {"--quantity kernel --full-curve", {"--full-curve", "quantity attention"}}})
    expect_refused(run(std::regex_replace(adv, std::regex(" --values \\S+| --draws \\d+"), "") + " " + args),
                   "advise " + args, words);
}

// Item 10: SIGINT during a sweep says how to resume and leaves no lock file; the same command then resumes (computing
// only the unfinished points) and writes the file.
TEST(BadInputs, SigintDuringASweepSaysHowToResume) {
  TempDir dir("kestrel_sweep_sigint");
  const std::string out = dir / "s.h5", err = dir / "err";
  const std::vector<std::string> args = {KESTREL_CLI, "sweep", "--sigma", "0.5,1,1.5,2", "--dim",        "16,32",
                                         "--points",  "2048",  "--pairs", "2",           "--estimators", "oprf,geom",
                                         "--out",     out};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // Interrupt once the first grid point is finished (its part file exists).
  const auto t0 = std::chrono::steady_clock::now();
  auto parts_done = [&] {
    std::error_code ec;
    int n = 0;
    for (const auto& e : fs::directory_iterator(out + ".parts", ec))
      n += e.path().filename().string().rfind('d', 0) == 0 && e.path().extension() == ".json";
    return n;
  };
  while (parts_done() == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "the sweep finished before the signal";
  const std::string said = slurp(err);
  EXPECT_NE(said.find("sweep interrupted: its finished grid points are kept in '" + out +
                      ".parts'; run the same command again to resume"),
            std::string::npos)
      << said;
  EXPECT_FALSE(fs::exists(out + ".parts/lock"));
  const int finished = parts_done();
  EXPECT_GE(finished, 1);
  std::string line;
  for (std::size_t i = 1; i < args.size(); ++i) line += " " + args[i];
  const CliRun again = run(line);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find(fmt::format("{} resumed", finished)), std::string::npos) << again.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".parts"));
}

// Item 10 (the lock): a lock's file goes when the lock ends, and the next writer takes a fresh one.
TEST(BadInputs, ALockLeavesNoFileBehind) {
  TempDir dir("kestrel_lock_file");
  const std::string path = dir / "lock";
  { kestrel::OutputLock lock(path, "the sweep 'x.h5'"); }
  EXPECT_FALSE(fs::exists(path));
  kestrel::OutputLock again(path, "the sweep 'x.h5'");
  EXPECT_EQ(slurp(path), std::to_string(::getpid()));
  EXPECT_THROW(kestrel::OutputLock(path, "the sweep 'x.h5'"), kestrel::IoError);
}

// Round three (issue 49). ---------------------------------------------------------------------------------------------

namespace {

// A .npy file (format 1.0) with the given descr and shape text and raw data bytes.
void write_npy(const std::string& path, const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = fmt::format("{{'descr': {}, 'fortran_order': False, 'shape': {}, }}", descr, shape);
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";  // 10 + header is a multiple of 64
  const std::string len{static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  write(path, std::string("\x93NUMPY\x01\x00", 8) + len + header + data);
}

std::string doubles(const std::vector<double>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

// Every number in a JSON document is finite (nlohmann writes NaN and Inf as null, so a null counts as not finite
// unless nulls_allowed: advise reports "not computed" as null).
bool all_finite(const nlohmann::json& j, bool nulls_allowed = false) {
  if (j.is_null()) return nulls_allowed;
  if (j.is_number_float()) return std::isfinite(j.get<double>());
  if (j.is_structured())
    for (const auto& v : j)
      if (!all_finite(v, nulls_allowed)) return false;
  return true;
}

}  // namespace

// "Silent" and "Unclear": a kernel alpha too large for the points is refused before computing, naming alpha (not a
// dataset, also with --out, and no file); points of size 1e300 in a file name the file, not sigma, and are computed
// (finite) with a sigma that brings them in range; a sigma too large still names sigma.
TEST(BadInputs, ExtremeScalesNameTheOptionThatIsTooLarge) {
  TempDir dir("kestrel_extreme");
  const std::string out = dir / "o.h5";
  const std::string alpha = "variance --kernel scaled:1e300 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet";
  expect_refused(run(alpha), "alpha", {"kernel alpha = 1e+300 is too large for these points"}, {"sigma = 0.5 is"});
  expect_refused(run(alpha + " --out " + out), "alpha --out", {"kernel alpha = 1e+300"}, {"dataset"});
  EXPECT_FALSE(fs::exists(out));
  // A large alpha within the range is computed, every number finite.
  const CliRun big =
      run("variance --kernel scaled:1e100 --dim 4 --points 32 --pairs 2 --estimators oprf --quiet --json");
  ASSERT_EQ(big.code, 0) << big.err;
  EXPECT_TRUE(all_finite(nlohmann::json::parse(big.out)["results"])) << big.out;

  std::string huge;
  for (int i = 0; i < 40; ++i) huge += fmt::format("{},{},{}\n", 1e300 * std::sin(i + 1.0), 1e300, -3e299);
  write(dir / "huge.csv", huge);
  const std::string file = "variance --regime file --estimators oprf --quiet --x-file " + (dir / "huge.csv");
  expect_refused(run(file + " --sigma 1 --out " + out), "huge points",
                 {"the points in " + (dir / "huge.csv") + " are too large", "beyond a double's range",
                  "divide them by a constant"},
                 {"sigma = 1 is"});
  EXPECT_FALSE(fs::exists(out));
  const CliRun scaled = run(file + " --sigma 1e-300 --json");
  ASSERT_EQ(scaled.code, 0) << scaled.err;
  EXPECT_TRUE(all_finite(nlohmann::json::parse(scaled.out)["results"])) << scaled.out;
  expect_refused(run("variance --sigma 1e200 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet"), "sigma",
                 {"sigma = 1e+200 is too large for these points"});
}

// "Silent", "Exit 0 with no result": advise refuses a tv target a total variation cannot exceed, and estimators that
// cannot apply (exit 2, every reason, no file); values of 1e300 or 1e-300 give the same advice as values near 1 (the
// metrics are relative: V is divided by a power of two, so V * 2^1000 gives bit-identical advice).
TEST(BadInputs, AdviseRefusesWhatCannotWorkAndScalesValues) {
  TempDir dir("kestrel_advise_round3");
  const std::string adv = advise_inputs(dir), out = dir / "a.h5";
  expect_refused(run(adv + " --metric tv --target 2"), "tv target", {"--target '2'", "tv", "at most 1"});
  expect_refused(run(std::regex_replace(adv, std::regex("--estimators pos"), "--estimators trig") + " --out " + out),
                 "trig", {"no estimator can be evaluated", "trig: its features can be negative", "--estimators"});
  EXPECT_FALSE(fs::exists(out));
  std::vector<std::string> advice;
  for (const int e : {0, 1000, -1000}) {
    std::ofstream f(dir / fmt::format("v{}.csv", e));
    for (int i = 0; i < 48; ++i)
      for (int j = 0; j < 4; ++j)
        f << fmt::format("{:.17g}", std::ldexp(0.1 * std::sin(1.0 + i * 4 + j + 'v'), e)) << (j == 3 ? "\n" : ",");
    f.close();
    const CliRun r =
        run(std::regex_replace(adv, std::regex("v\\.csv"), fmt::format("v{}.csv", e)) + " --json --no-timing");
    ASSERT_EQ(r.code, 0) << e << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out)["advice"];
    EXPECT_TRUE(all_finite(j, true)) << e;
    EXPECT_EQ(j["rows"][0]["status"], "ok") << e;
    EXPECT_TRUE(std::isfinite(j["rows"][0]["error_at_m_p95"].get<double>())) << e;
    EXPECT_NE(j["recommendation"].get<std::string>().find("pos"), std::string::npos) << j["recommendation"];
    advice.push_back(j.dump());
  }
  EXPECT_EQ(advice[1], advice[0]);
  EXPECT_EQ(advice[2], advice[0]);
}

// "Unclear" points files: a trailing comma, a '#' comment (skipped, as numpy.loadtxt does), unsupported .npy dtypes
// and a structured array are named as what they are; --sigma 0,5 names the decimal comma; a file with fewer points
// than coordinates is read one point per row, with a warning saying so.
TEST(BadInputs, PointsFilesAndListsSayWhatIsWrong) {
  TempDir dir("kestrel_unclear3");
  const std::string var = "variance --regime file --sigma 0.5 --estimators oprf --json --quiet --x-file ";
  std::string body = points_text(40, 3);
  write(dir / "plain.csv", body);
  std::string trailing = body;
  std::size_t third = 0;
  for (int k = 0; k < 3; ++k) third = trailing.find('\n', third) + 1;
  trailing.insert(third - 1, ",");  // line 3 ends with a comma
  write(dir / "trailing.csv", trailing);
  expect_refused(run(var + (dir / "trailing.csv")), "trailing comma",
                 {"trailing.csv: line 3 ends with ','", "remove the trailing comma"}, {"fields, expected"});
  write(dir / "comments.csv", "# made by np.savetxt\n" + body.substr(0, third) + "  # a note\n" + body.substr(third));
  const CliRun plain = run(var + (dir / "plain.csv")), commented = run(var + (dir / "comments.csv"));
  ASSERT_EQ(commented.code, 0) << commented.err;
  EXPECT_EQ(nlohmann::json::parse(commented.out)["results"], nlohmann::json::parse(plain.out)["results"]);

  write_npy(dir / "half.npy", "'<f2'", "(40, 3)", std::string(240, '\0'));
  expect_refused(run(var + (dir / "half.npy")), "<f2",
                 {"dtype '<f2' (half-precision float array) is not supported", "astype('float64')"});
  write_npy(dir / "big.npy", "'>f8'", "(40, 3)", std::string(960, '\0'));
  expect_refused(run(var + (dir / "big.npy")), ">f8", {"dtype '>f8' (big-endian array)"});
  write_npy(dir / "fields.npy", "[('a', '<f8'), ('b', '<f8')]", "(40,)", std::string(640, '\0'));
  expect_refused(run(var + (dir / "fields.npy")), "structured",
                 {"a structured array (named fields [('a', '<f8'), ('b', '<f8')])", "structured_to_unstructured"},
                 {"dimensions"});

  expect_refused(run("variance --sigma 0,5 --dim 4 --points 16 --quiet"), "decimal comma",
                 {"--sigma: expected numbers > 0, got '0' in the list '0,5'", "write '0.5'"});

  std::vector<double> wide(4 * 100);
  for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = 0.05 * std::sin(1.0 + static_cast<double>(i));
  write_npy(dir / "wide.npy", "'<f8'", "(4, 100)", doubles(wide));
  const CliRun w = run("advise --queries " + (dir / "wide.npy") + " --keys " + (dir / "wide.npy") +
                       " --budget 4 --draws 4 --rows 2 --estimators pos --samplers iid --no-timing --quiet --json");
  EXPECT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.err.find("warning: " + (dir / "wide.npy") +
                       " has 4 rows of 100 values: read as 4 points of dimension d = 100 (one point per row)"),
            std::string::npos)
      << w.err;
  EXPECT_EQ(std::count(w.err.begin(), w.err.end(), '\n'), 2) << w.err;  // once per file (queries and keys)
}

// Issue 47 item 1: --from-position beyond the sequence or without --causal is refused with one line, exit 2, no file.
TEST(BadInputs, AdviseFromPositionNeedsCausalAndAPositionInTheSequence) {
  TempDir dir("kestrel_from_position");
  const std::string base = advise_inputs(dir), out = dir / "r.h5";
  for (const std::string bad : {" --from-position 8", " --causal --from-position 48", " --causal --from-position 99"}) {
    const CliRun r = run(base + bad + " --out " + out);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--from-position"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << bad;
  }
  // Issue 68 item 4: beyond the last two sampled rows (16 rows, one per stratum of 3 positions) is an option error
  // naming the range, not "no estimator could be evaluated" (exit 1).
  expect_refused(
      run(base + " --causal --from-position 47 --out " + out), "beyond the sampled rows",
      {"--from-position 47: only", "of the 16 sampled rows are at or beyond it", "give --from-position 1..4"},
      {"no estimator"});
  EXPECT_FALSE(fs::exists(out));
  const CliRun ok = run(base + " --causal --from-position 8 --json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto row = nlohmann::json::parse(ok.out)["advice"]["rows"][0];
  EXPECT_TRUE(row.contains("from") && row.contains("causal")) << row.dump();
}

// Issue 65: --learned fits a map on some sequences of one head ([sequences, L, d]) and judges it on the others; its
// options alone, a mask, 2-D inputs, no values or no sequence left to fit on are refused in one line (exit 2, no file).
TEST(BadInputs, AdviseLearnedNeedsSequencesOfOneHead) {
  TempDir dir("kestrel_learned");
  const auto npy = [&](const std::string& name, std::vector<std::size_t> shape, double seed) {
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.8 * std::sin(seed + 1.3 * static_cast<double>(i));
    write_npy(dir / name, "'<f8'", fmt::format("({},)", fmt::join(shape, ", ")), doubles(v));
    return dir / name;
  };
  const std::string q = npy("q.npy", {3, 24, 4}, 1), k = npy("k.npy", {3, 24, 4}, 2), v = npy("v.npy", {3, 24, 2}, 3),
                    q2 = npy("q2.npy", {24, 4}, 4), v2 = npy("v2.npy", {24, 2}, 5);
  const std::string adv =
      " --budget 16 --draws 8 --max-draws 16 --rows 8 --estimators pos --samplers iid --quiet "
      "--learned-features 4,8 --fit-seeds 1";
  const std::string out = dir / "r.h5";
  const auto refused = [&](const std::string& args, const std::string& words) {
    const CliRun r = run("advise " + args + " --out " + out);
    expect_refused(r, args, {words});
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  const std::string seqs = "--queries " + q + " --keys " + k + " --values " + v;
  refused(
      "--queries " + q2 + " --keys " + q2 + " --values " + v2 + " --learned hedgehog" + adv,
      "--queries: learned maps need sequences as [sequences, L, d], [sequences, heads, L, d] or [sequences, layers, "
      "heads, L, d], got [24, 4]");
  refused(seqs + " --held-out 1 --quiet", "--held-out '1': only used with --learned");
  refused(seqs + " --learned hedgehog --metric tv" + adv, "--metric 'tv': learned maps are judged by the rmse");
  refused(seqs + " --learned hedgehog --sums fp16" + adv, "--sums 'fp16': the rounding of number formats");
  refused(seqs + " --learned luna" + adv, "luna");
  refused("--queries " + q + " --keys " + k + " --learned hedgehog" + adv, "give --values too");
  refused(seqs + " --learned hedgehog --held-out 3" + adv, "held");
  // [sequences, layers, heads, L, d]: 2 query heads sharing 1 key/value head, advised per head (not without --learned)
  const std::string q5 = npy("q5.npy", {3, 1, 2, 24, 4}, 6), k5 = npy("k5.npy", {3, 1, 1, 24, 4}, 7),
                    v5 = npy("v5.npy", {3, 1, 1, 24, 2}, 8);
  const std::string five = "--queries " + q5 + " --keys " + k5 + " --values " + v5;
  refused(five + " --budget 16 --quiet", "got 5 axes");
  const CliRun stacked = run("advise " + five + " --learned hedgehog --json" + adv);
  ASSERT_EQ(stacked.code, 0) << stacked.err;
  const auto heads = nlohmann::json::parse(stacked.out)["advice"]["heads"];
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[1]["kv_head"], 0);
  const CliRun ok = run("advise " + seqs + " --learned hedgehog --json" + adv);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto rows = nlohmann::json::parse(ok.out)["advice"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["estimator"], "hedgehog");
  EXPECT_EQ(rows[1]["learned"]["parameters"][0]["shape"], nlohmann::json::array({4, 4}));  // M = 8: P = 4 rows of d
  EXPECT_EQ(rows[1]["curve"]["m"], nlohmann::json::array({4.0, 8.0}));
}

// Item 2 of "Attention as models run it": .npy inputs of [heads, L, d] are advised per head. Key heads that do not
// divide the query heads, another d or L, or 3-D beside 4-D are refused in one line naming the values (exit 2, no
// report, no plot); grouped-query heads run and the report says so, with a row per head (--causal applies per head).
TEST(BadInputs, AdviseHeadsThatDoNotFitAreRefusedAndGroupedQueryIsSaid) {
  TempDir dir("kestrel_heads");
  const auto npy = [&](const std::string& name, std::vector<std::size_t> shape, double seed) {
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5 * std::sin(seed + 1.7 * static_cast<double>(i));
    write_npy(dir / name, "'<f8'", fmt::format("({},)", fmt::join(shape, ", ")), doubles(v));
    return dir / name;
  };
  const std::string q3 = npy("q3.npy", {3, 24, 4}, 1), k2 = npy("k2.npy", {2, 24, 4}, 2),
                    k1 = npy("k1.npy", {1, 24, 4}, 3), k5 = npy("k5.npy", {1, 24, 5}, 4),
                    v1 = npy("v1.npy", {1, 23, 2}, 5), k4d = npy("k4d.npy", {1, 1, 24, 4}, 6);
  const std::string adv = " --budget 64 --draws 8 --max-draws 16 --rows 8 --estimators pos --samplers iid --quiet";
  const std::string out = dir / "r.h5";
  const auto refused = [&](const std::string& args, const std::string& words) {
    const CliRun r = run("advise " + args + adv + " --out " + out);
    expect_refused(r, args, {words});
    EXPECT_FALSE(fs::exists(out)) << args;
    EXPECT_FALSE(fs::exists(dir / "r.png")) << args;
  };
  refused("--queries " + q3 + " --keys " + k2,
          "--keys has 2 heads, which does not divide the 3 query heads of --queries: grouped-query attention needs");
  refused("--queries " + q3 + " --keys " + k5, "--keys has d = 5 but --queries has d = 4");
  refused("--queries " + q3 + " --keys " + k1 + " --values " + v1,
          "--values has L = 23 tokens per head but --keys has L = 24");
  refused("--queries " + q3 + " --keys " + k4d, "--keys has the shape [1, 1, 24, 4] but --queries has [3, 24, 4]");
  // Issue 68 item 4: a stack of values beside 2-D queries and keys names --values (not --keys against --queries,
  // whose shapes agree); a 6-D file says the shapes advise takes (not "points need a 2-D array"), a 5-D one that only
  // learned maps take it.
  const std::string q2 = npy("q2.npy", {24, 4}, 8), v3 = npy("v3.npy", {1, 24, 2}, 9),
                    q5 = npy("q5.npy", {1, 1, 1, 24, 4}, 10), q6 = npy("q6.npy", {1, 1, 1, 1, 24, 4}, 11);
  refused("--queries " + q2 + " --keys " + q2 + " --values " + v3,
          "--values has the shape [1, 24, 2] but --queries has [24, 4] and --keys has [24, 4]: give all of them as "
          "[heads, L, d], or --values with 2 axes as they are");
  refused("--queries " + q6 + " --keys " + q6,
          "the array has 6 dimensions; tokens need a 2-D array [L, d] (one token per row) or a stack [heads, L, d] or "
          "[layers, heads, L, d] (with --learned: [sequences, ...] first)");
  refused("--queries " + q5 + " --keys " + q5,  // 5 axes are read, and only --learned takes them
          "--queries: expected [L, d], [heads, L, d] or [layers, heads, L, d] (learned maps: a sequences axis first), "
          "got 5 axes [1, 1, 1, 24, 4]");
  // The 2-D commands that read points files still refuse stacks.
  expect_refused(run("variance --regime file --sigma 0.5 --estimators oprf --quiet --x-file " + q3), "variance",
                 {"the array has 3 dimensions; points need a 2-D array"});

  const std::string v24 = npy("v24.npy", {1, 24, 2}, 7);
  const CliRun ok = run("advise --queries " + q3 + " --keys " + k1 + " --values " + v24 + adv + " --causal --json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out)["advice"];
  EXPECT_EQ(j["inputs"]["query_heads"], 3);
  EXPECT_EQ(j["inputs"]["kv_heads"], 1);
  EXPECT_NE(j["inputs"]["grouped_query"].get<std::string>().find("3 query heads share 1 key/value heads"),
            std::string::npos);
  ASSERT_EQ(j["rows"].size(), 3u);
  for (int h = 0; h < 3; ++h) {
    EXPECT_EQ(j["rows"][h]["head"], h);
    EXPECT_EQ(j["rows"][h]["kv_head"], 0);
    EXPECT_TRUE(j["rows"][h].contains("causal")) << j["rows"][h].dump();
  }
  EXPECT_EQ(j["summary"].size(), 1u);
  const CliRun table = run("advise --queries " + q3 + " --keys " + k1 + adv + " --out " + out);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("grouped-query attention: 3 query heads share 1 key/value heads"), std::string::npos)
      << table.out;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_GT(fs::file_size(dir / "r.png"), 1000u);
}

// Round four (issue 68). ------------------------------------------------------------------------------------------

namespace {

// The grid point files of a sweep's parts directory (not options.json, a shard's record or a lock), sorted.
std::vector<std::string> point_files(const std::string& parts) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parts)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name != "options.json" && name.rfind("shard-", 0) != 0)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The broken forms of a file kestrel reads back: truncated, empty, binary (with a newline and NULs) and foreign JSON.
std::vector<std::pair<std::string, std::string>> broken_forms(const std::string& text) {
  return {{"truncated", text.substr(0, text.size() / 2)},
          {"empty", ""},
          {"binary", std::string("\x89HDF\r\n\x1a\n\0\0\xff\xfe", 12)},
          {"foreign", "{\"name\": \"not kestrel's\"}"}};
}

}  // namespace

// Item 1: a grid that leaves out grid points of a finished sweep is refused without --force, naming them and the grid
// that keeps them, through one process and `sweep merge`; nothing is written; --force replaces; a superset extends.
TEST(BadInputs, AFinishedSweepIsNeverDroppedWithoutForce) {
  TempDir dir("kestrel_sweep_keeps");
  const std::string out = dir / "s.h5";
  const std::string base = "sweep --dim 4 --points 32 --pairs 1 --estimators oprf --quiet --out " + out;
  ASSERT_EQ(run(base + " --sigma 0.5,1").code, 0);
  const std::string before = slurp(out);
  for (const std::string sigma : {"0.5", "0.5,2"}) {
    expect_refused(run(base + " --sigma " + sigma), sigma,
                   {"holds a finished sweep with 1 grid points that this grid leaves out (d=4 L=32 M=1 sigma=1)",
                    "rerun with --sigma " + sigma + ",1 to extend it", "pass --force to replace it"});
    EXPECT_EQ(slurp(out), before) << sigma;
    EXPECT_FALSE(fs::exists(out + ".parts")) << sigma;
  }
  ASSERT_EQ(run(base + " --sigma 0.5 --shard 0/1").code, 0);  // a shard writes parts only
  EXPECT_EQ(slurp(out), before);
  expect_refused(run("sweep merge " + out + " --quiet"), "merge",
                 {"1 grid points that this grid leaves out (d=4 L=32 M=1 sigma=1)",
                  "nothing was written; move '" + out + "' away to keep it and merge again", "pass --force"});
  EXPECT_EQ(slurp(out), before);
  EXPECT_TRUE(fs::exists(out + ".parts"));
  const CliRun forced = run("sweep merge " + out + " --force --quiet --json");
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(forced.out)["results"].size(), 1u);
  const CliRun wider = run(base + " --sigma 1,0.5 --json");  // a superset extends without --force
  ASSERT_EQ(wider.code, 0) << wider.err;
  EXPECT_EQ(nlohmann::json::parse(wider.out)["results"].size(), 2u);
}

// Item 2: a broken grid point file, options.json or shard record is named with what to do (exit 2, one line, none
// of its bytes or the JSON library's text), before anything is computed or written; the rerun then resumes.
TEST(BadInputs, BrokenSweepPartsAreNamedWithTheFix) {
  TempDir dir("kestrel_sweep_broken");
  const std::string out = dir / "s.h5", parts = out + ".parts";
  const std::string sweep =
      "sweep --sigma 0.5,1,2 --dim 4 --points 32 --pairs 1 --estimators oprf --quiet --out " + out;
  ASSERT_NE(run(sweep, "KESTREL_TEST_SWEEP_STOP=after=1 ").code, 0);  // interrupted after one grid point
  ASSERT_EQ(point_files(parts).size(), 1u);
  const std::string part = point_files(parts)[0], good = slurp(part), opt = parts + "/options.json",
                    good_opt = slurp(opt);
  const std::vector<std::string> absent = {"json.exception", "HDF", "not kestrel's"};
  for (const auto& [form, text] : broken_forms(good)) {
    write(part, text);
    expect_refused(run(sweep), form,
                   {"grid point file '" + part + "' is ", "delete it and rerun the same command (only that grid point"},
                   absent);
    EXPECT_EQ(point_files(parts).size(), 1u) << form;  // nothing computed
    EXPECT_FALSE(fs::exists(out)) << form;
  }
  write(part, good);
  for (const auto& [form, text] : broken_forms(good_opt)) {
    write(opt, text);
    expect_refused(run(sweep), "options.json " + form,
                   {"'" + opt + "' is ", "if they are this sweep's, delete it and rerun the same command",
                    "otherwise remove '" + parts + "'"},
                   absent);
    EXPECT_EQ(point_files(parts).size(), 1u) << form;
  }
  write(opt, good_opt);
  ASSERT_EQ(run(sweep).code, 0);

  // Shards: a broken record or part stops the merge naming the shard to rerun; nothing is written.
  const std::string out2 = dir / "t.h5", parts2 = out2 + ".parts";
  const std::string shard = std::regex_replace(sweep, std::regex(" --out \\S+"), " --out " + out2);
  ASSERT_EQ(run(shard + " --shard 0/2").code, 0);
  ASSERT_EQ(run(shard + " --shard 1/2").code, 0);
  const std::string record = parts2 + "/shard-1-of-2.json", good_record = slurp(record);
  for (const auto& [form, text] : broken_forms(good_record)) {
    write(record, text);
    expect_refused(run("sweep merge " + out2 + " --quiet"), "record " + form,
                   {"shard record '" + record + "' is ", "delete it and rerun shard 1/2"}, absent);
    EXPECT_FALSE(fs::exists(out2)) << form;
  }
  write(record, good_record);
  const std::string part2 = point_files(parts2)[0];  // d4_L32_M1_s0.5: grid point #0, shard 0/2
  write(part2, "[1, 2]");
  expect_refused(run("sweep merge " + out2 + " --quiet"), "merged part",
                 {"grid point file '" + part2 + "' is JSON that is not a grid point's results",
                  "delete it and rerun shard 0/2 (only that grid point is computed again), then merge again"});
  EXPECT_FALSE(fs::exists(out2));
  fs::remove(part2);
  ASSERT_EQ(run(shard + " --shard 0/2").code, 0);
  const CliRun merged = run("sweep merge " + out2 + " --quiet");
  EXPECT_EQ(merged.code, 0) << merged.err;
}
