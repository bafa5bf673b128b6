// The options front-end (issue #15 items 1-3): strict parsing (core/parse.hpp), the one study options table
// with its strict TOML reader (frontend/study_options.hpp), points files (data/points_file.hpp), sweeps over one's
// own data and their extension, and "DumbInputs": malformed command lines across variance, sweep, reproduce
// and datasets, each exiting 2 with one line naming the offending value and creating or changing no file.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "core/parse.hpp"
#include "data/points_file.hpp"
#include "frontend/advise_options.hpp"
#include "frontend/study_options.hpp"
#include "io/hdf5.hpp"

namespace fs = std::filesystem;
using namespace kestrel;

namespace {

using test::CliRun;
using test::temp_dir;

// The error file goes to the temporary directory (test::run), not into dir, whose contents the tests compare.
CliRun run(const std::string& args, const fs::path&) { return test::run(args); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// n points of dimension d, row i = (i, i/2, ...) scaled, as CSV.
std::string csv_points(int n, int d) {
  std::string s;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) s += fmt::format("{}{}", 0.01 * ((i * 7 + j * 3) % 17) - 0.08, j + 1 < d ? "," : "\n");
  return s;
}

// The same points (one per row) as a little-endian float64 .npy file in C order.
// shape: the header's shape instead of (rows, cols), e.g. "(4,)" for a 1-D array of the same values.
void write_npy(const fs::path& p, const arma::mat& rows, const std::string& shape = "") {
  std::string header = fmt::format("{{'descr': '<f8', 'fortran_order': False, 'shape': {}, }}",
                                   shape.empty() ? fmt::format("({}, {})", rows.n_rows, rows.n_cols) : shape);
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream f(p, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const unsigned short len = static_cast<unsigned short>(header.size());
  f.put(static_cast<char>(len & 0xff)).put(static_cast<char>(len >> 8));
  f << header;
  const arma::mat c_order = rows.t();  // row i contiguous
  f.write(reinterpret_cast<const char*>(c_order.memptr()), static_cast<std::streamsize>(c_order.n_elem * 8));
}

// Every file under dir with its size and modification time.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> s;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    s[e.path().string()] = e.is_regular_file()
                               ? fmt::format("{} {}", e.file_size(), e.last_write_time().time_since_epoch().count())
                               : "dir";
  return s;
}

}  // namespace

TEST(Parse, StrictNumbers) {
  EXPECT_EQ(parse_uint("--seed", "18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_uint("--seed", "+7"), 7u);
  for (const char* bad : {"-1", "99999999999999999999", "18446744073709551616", "1e30", "4.0", "", " ", "0x10", "1 2"})
    EXPECT_THROW(parse_uint("--seed", bad), InvalidArgument) << bad;
  EXPECT_THROW(parse_uint("--dim", "0", 1), InvalidArgument);
  try {
    parse_uint("--seed", "-1");
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--seed"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'-1'"), std::string::npos);
  }
  EXPECT_EQ(parse_real("--sigma", "1e-3"), 1e-3);
  for (const char* bad : {"nan", "inf", "-inf", "1e400", "0.5x", "", "1,2"})
    EXPECT_THROW(parse_real("--sigma", bad), InvalidArgument) << bad;
  EXPECT_EQ(split_list("x", " a, b ,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_THROW(split_list("x", "a,,b"), InvalidArgument);
  EXPECT_THROW(require_distinct("x", {"oprf", "trig", "oprf"}), InvalidArgument);
  EXPECT_EQ(nearest("sigmaa", {"sigma", "seed", "dim"}), "sigma");
  EXPECT_EQ(nearest("halve_real", {"halve-real", "kernel"}), "halve-real");
  EXPECT_EQ(nearest("completely-different", {"dim"}), "");
}

TEST(StudyOptions, TableDefaultsAreTheStructDefaults) {
  const VarianceStudyOptions d;
  const auto o = variance_options({});
  EXPECT_EQ(o.sigmas, d.sigmas);
  EXPECT_EQ(o.dim, d.dim);
  EXPECT_EQ(o.points, d.points);
  EXPECT_EQ(o.estimators, d.estimators);
  EXPECT_EQ(o.seed, d.seed);
  // Every option of `variance` is in the table, hence in `sweep` and Python.
  for (const char* name : {"regime",     "sigma",    "dim",        "points",     "pairs",     "seed",
                           "estimators", "kernel",   "features",   "mc",         "mc-points", "sampler",
                           "halve-real", "data-dir", "preprocess", "spectrum",   "clusters",  "cluster-radius",
                           "x-file",     "y-file",   "resize",     "pixel-scale"})
    EXPECT_NO_THROW(find_study_option(name)) << name;
  const auto s = sweep_options({{"dim", {"4,8", "--dim"}}, {"sigma", {"0.5,2", "--sigma"}}});
  EXPECT_EQ(s.dims, (std::vector<arma::uword>{4, 8}));
  EXPECT_EQ(s.sigmas, (std::vector<double>{0.5, 2}));
  EXPECT_EQ(s.points, (std::vector<arma::uword>{d.points}));
}

// The recorded options (issue 45 item 2) are {option: value as the command line spells it} from the table: every option
// is recorded under its name, and the entries that differ from the defaults' record, given back as the command line
// (only what differs is given: some options are refused where nothing reads them), rebuild the same options and so
// the same record; a changed option changes the record under its own name. Checked on non-default values of every
// kind: reals and integers in lists, a flag, text, an integer-text option and a default that depends on other options.
namespace {
GivenValues as_given(const nlohmann::json& record, const nlohmann::json& defaults) {
  GivenValues v;
  for (const auto& [name, value] : record.items()) {
    if (value == defaults.at(name)) continue;
    std::string text;
    for (const auto& item : value.is_array() ? value : nlohmann::json::array({value}))
      text += (text.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
    v[name] = {text, "record: " + name};
  }
  return v;
}
}  // namespace

TEST(StudyOptions, TheRecordIsTheCommandLineAndRebuildsTheOptions) {
  const GivenValues given = {{"regime", {"aniso", "--regime"}},
                             {"spectrum", {"rank:3", "--spectrum"}},
                             {"sigma", {"0.25,1.5", "--sigma"}},
                             {"dim", {"6", "--dim"}},
                             {"points", {"40", "--points"}},
                             {"estimators", {"pos,oprf", "--estimators"}},
                             {"kernel", {"scaled:0.5", "--kernel"}},
                             {"halve-real", {"true", "--halve-real"}},
                             {"mc", {"8", "--mc"}},
                             {"sampler", {"orthogonal", "--sampler"}},
                             {"seed", {"12345678901234", "--seed"}}};
  const VarianceStudyOptions o = variance_options(given);
  const nlohmann::json rec = record_study(o);
  EXPECT_EQ(rec.size(), study_options().size());  // every option, once
  EXPECT_EQ(rec.at("sigma"), nlohmann::json::array({0.25, 1.5}));
  EXPECT_EQ(rec.at("estimators"), nlohmann::json::array({"pos", "oprf"}));
  EXPECT_EQ(rec.at("halve-real"), true);
  EXPECT_EQ(rec.at("seed"), 12345678901234u);
  EXPECT_EQ(rec.at("kernel"), "scaled:0.5");
  EXPECT_TRUE(rec.at("mc-points").is_null());  // min(64, L): depends on --points
  const nlohmann::json again = record_study(variance_options(as_given(rec, record_study(variance_options({})))));
  EXPECT_EQ(again, rec);
  GivenValues other = given;
  other["seed"] = {"2", "--seed"};
  const nlohmann::json changed = record_study(variance_options(other));
  for (const auto& [name, value] : rec.items()) EXPECT_EQ(changed.at(name) == value, name != "seed") << name;
  // A sweep records its grid axes as lists under the same names; the rest as `variance` does.
  GivenValues grid = given;
  grid["dim"] = {"4,8", "--dim"}, grid["features"] = {"1,16", "--features"};
  const SweepOptions s = sweep_options(grid);
  EXPECT_EQ(s.recorded.at("dim"), nlohmann::json::array({4, 8}));
  EXPECT_EQ(s.recorded.at("features"), nlohmann::json::array({1, 16}));
  EXPECT_EQ(s.recorded.at("sigma"), rec.at("sigma"));
  EXPECT_EQ(s.recorded.at("kernel"), rec.at("kernel"));
  // An image regime's pixel scale is an integer-text option: recorded as its text.
  const nlohmann::json img = record_study(variance_options({{"regime", {"mnist", "--regime"}},
                                                            {"dim", {"64", "--dim"}},
                                                            {"points", {"8", "--points"}},
                                                            {"preprocess", {"raw", "--preprocess"}},
                                                            {"pixel-scale", {"255", "--pixel-scale"}}}));
  EXPECT_EQ(img.at("pixel-scale"), "255");
  EXPECT_EQ(record_study(variance_options(as_given(img, record_study(variance_options({}))))), img);
}

TEST(AdviseOptions, TheRecordIsTheCommandLineAndRebuildsTheOptions) {
  const GivenValues given = {{"target", {"0.05", "--target"}},
                             {"estimators", {"oprf,pos", "--estimators"}},
                             {"samplers", {"iid,simplex", "--samplers"}},
                             {"sums", {"bf16,fp16", "--sums"}},
                             {"causal", {"true", "--causal"}},
                             {"no-timing", {"true", "--no-timing"}},
                             {"scaling", {"none", "--scaling"}},
                             {"seed", {"9", "--seed"}}};
  const nlohmann::json rec = record_advise(advise_options_from(given));
  EXPECT_EQ(rec.size(), advise_options().size());
  EXPECT_EQ(rec.at("target"), 0.05);
  EXPECT_EQ(rec.at("estimators"), nlohmann::json::array({"oprf", "pos"}));
  EXPECT_EQ(rec.at("sums"), nlohmann::json::array({"bf16", "fp16"}));
  EXPECT_EQ(rec.at("no-timing"), true);
  EXPECT_EQ(rec.at("scaling"), "none");
  EXPECT_EQ(record_advise(advise_options_from(as_given(rec, record_advise(advise_options_from({}))))), rec);
  EXPECT_EQ(record_advise(AdviseOptions{}).at("estimators"), nlohmann::json::array({"all"}));  // the default, shown
}

TEST(StudyOptions, TomlIsReadStrictly) {
  const fs::path dir = temp_dir("kestrel_toml");
  write(dir / "ok.toml",
        "[sweep]\nsigma = [0.5, 1]\ndim = [4, 8]\nhalve-real = true\nestimators = [\"oprf\", \"trig\"]\n"
        "mc = 8\nmc-points = 8\n[variance]\nsigma = 0.25\n");
  const auto v = read_study_toml((dir / "ok.toml").string(), StudyCommand::Sweep);
  EXPECT_EQ(v.at("sigma").text, "0.5,1");
  EXPECT_EQ(v.at("dim").text, "4,8");
  EXPECT_EQ(v.at("halve-real").text, "true");
  EXPECT_EQ(v.count("points"), 0u);
  const auto s = sweep_options(v);
  EXPECT_TRUE(s.base.halve_real);
  EXPECT_EQ(s.base.mc_points, 8u);
  EXPECT_EQ(read_study_toml((dir / "ok.toml").string(), StudyCommand::Variance).at("sigma").text, "0.25");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[sweep]\nsigma = [0.5,\n", "bad.toml:2:"},            // syntax: file:line:column
      {"[sweep]\nsigmaa = [0.5]\n", "did you mean 'sigma'"},  // unknown key
      {"[swep]\nsigma = [0.5]\n", "did you mean 'sweep'"},    // misspelled section
      {"[sweep]\nhalve_real = true\n", "did you mean 'halve-real'"},
      {"sigma = [0.5]\n", "outside a section"},
      {"[sweep]\ndim = \"abc\"\n", "abc"},
      {"[sweep]\nhalve-real = 1\n", "true or false"},
      {"[variance]\ndim = [4, 8]\n", "takes one value"},  // checked even when running sweep
      {"[sweep]\nout = \"x.h5\"\n", "command-line option"},
      {"[sweep]\nsigma = []\n", "empty"},
      {"[sweep]\n[sweep.grid]\nsigma = 1\n", "unknown option 'grid'"}};
  for (const auto& [text, word] : bad) {
    write(dir / "bad.toml", text);
    try {
      read_study_toml((dir / "bad.toml").string(), StudyCommand::Sweep);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << text << " -> " << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.toml"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_study_toml((dir / "none.toml").string(), StudyCommand::Sweep), InputFileError);
  fs::remove_all(dir);
}

TEST(PointsFile, CsvNpyAndHdf5GiveTheSamePoints) {
  const fs::path dir = temp_dir("kestrel_points");
  write(dir / "p.csv", "a,b,c\n" + csv_points(10, 3));  // a header line is skipped
  const auto csv = load_points((dir / "p.csv").string());
  ASSERT_EQ(csv->points.n_rows, 3u);
  ASSERT_EQ(csv->points.n_cols, 10u);
  write_npy(dir / "p.npy", csv->points.t());
  {
    H5Writer h5((dir / "p.h5").string());
    h5.write("/data/X", arma::mat(csv->points.t()), {"points", "point,coordinate"});
    h5.commit();
  }
  EXPECT_TRUE(arma::approx_equal(load_points((dir / "p.npy").string())->points, csv->points, "absdiff", 0));
  EXPECT_TRUE(arma::approx_equal(load_points((dir / "p.h5:/data/X").string())->points, csv->points, "absdiff", 0));
  EXPECT_EQ(csv->sha256.size(), 64u);
  write(dir / "nan.csv", "1,2\n3,nan\n");
  write(dir / "one.csv", "1,2\n");
  write(dir / "ragged.csv", "1,2\n3\n");
  for (const char* bad : {"nan.csv", "one.csv", "ragged.csv", "missing.csv", "p.h5", "p.h5:/nope"})
    EXPECT_THROW(load_points((dir / bad).string()), InputFileError) << bad;
  fs::remove_all(dir);
}

TEST(DumbInputs, EveryMalformedInputExitsTwoNamingTheValueAndWritesNothing) {
  const fs::path dir = temp_dir("kestrel_dumb");
  const std::string D = dir.string();
  write(dir / "good.csv", csv_points(40, 4));
  write(dir / "good3.csv", csv_points(40, 3));
  write(dir / "bad.csv", "1,2,3,4\n5,6,seven,8\n1,2,3,4\n");
  write(dir / "syntax.toml", "[sweep]\nsigma = [0.5\n");
  write(dir / "unknown_key.toml", "[sweep]\nsigmaa = [0.5]\n");
  write(dir / "section.toml", "[swep]\nsigma = [0.5]\n");
  write(dir / "underscore.toml", "[sweep]\nhalve_real = true\n");
  write(dir / "toplevel.toml", "sigma = [0.5]\n");
  write(dir / "wrongtype.toml", "[sweep]\ndim = \"abc\"\n");
  write(dir / "listvar.toml", "[variance]\ndim = [4, 8]\n");
  write(dir / "out.toml", "[sweep]\nout = \"x.h5\"\n");
  write(dir / "existing.h5", "not touched");
  write(dir / "nan.csv", "1,2,3,4\n5,6,nan,8\n1,2,3,4\n");
  write(dir / "single.csv", "1,2,3,4\n");
  write(dir / "empty.csv", "");
  write(dir / "v39.csv", csv_points(39, 2));
  write_npy(dir / "oned.npy", arma::mat{1.0, 2.0, 3.0, 4.0}, "(4,)");  // a 1-D array
  const std::string adv = "advise --quiet --no-timing --out " + D + "/a.h5 --keys " + D + "/good.csv ";
  const std::string advq = adv + "--queries " + D + "/good.csv ";
  const std::string var = "variance --quiet --out " + D + "/v.h5 ";
  const std::string swp = "sweep --quiet --out " + D + "/s.h5 --pairs 1 ";
  // {arguments, text the error must contain}
  const std::vector<std::pair<std::string, std::string>> cases = {
      {var + "--seed -1", "'-1'"},
      {var + "--seed 99999999999999999999", "99999999999999999999"},
      {var + "--seed 1e30", "1e30"},
      {var + "--dim -4", "'-4'"},
      {var + "--dim 0", "--dim"},
      {var + "--dim abc", "abc"},
      {var + "--dim 4.5", "4.5"},
      {var + "--points 1000000000", "bytes"},
      {var + "--points -3", "'-3'"},
      {var + "--sigma 1e300", "sigma = 1e+300"},
      {var + "--sigma -1", "'-1'"},
      {var + "--sigma 0", "--sigma"},
      {var + "--sigma nan", "nan"},
      {var + "--sigma inf", "inf"},
      {var + "--sigma 0.5,,1", "0.5,,1"},
      {var + "--sigma 0.5,0.5", "listed twice"},
      {var + "--estimators oprf,oprf", "'oprf' is listed twice"},
      {var + "--estimators opfr", "did you mean 'oprf'"},
      {var + "--regime moon", "moon"},
      {var + "--regime file", "--x-file"},
      {var + "--regime file --x-file " + D + "/missing.csv", "missing.csv"},
      {var + "--regime file --x-file " + D + "/bad.csv", "seven"},
      {var + "--x-file " + D + "/good.csv", "--regime file"},
      {var + "--regime file --x-file " + D + "/good.csv --dim 5", "--dim"},
      {var + "--regime file --x-file " + D + "/good.csv --points 1000", "--points"},
      {var + "--regime file --x-file " + D + "/good.csv --y-file " + D + "/good3.csv", "--y-file"},
      {var + "--mc 2", "--mc"},
      {var + "--mc 10 --mc-points 100 --points 16", "--mc-points"},
      {var + "--kernel laplace", "laplace"},
      {var + "--sampler sobol", "sobol"},
      {var + "--preprocess whiten", "whiten"},
      {var + "--resize bicubic", "bicubic"},
      {var + "--pixel-scale 256", "'256'"},
      {var + "--pairs 0", "--pairs"},
      {var + "--features 0", "--features"},
      {var + "--features 2,4", "kestrel sweep"},
      {var + "--regime clustered --cluster-radius -1", "'-1'"},
      {var + "--regime clustered --clusters 0", "--clusters"},
      {var + "--regime aniso --spectrum cubic:3", "cubic"},
      {var + "--data-dir " + D + "/nonexistent", "nonexistent"},
      {var + "--quantity kernel", "'kernel'"},
      {var + "--quantity attentoin", "did you mean 'attention'"},
      {var + "--quantity kc --values gauss", "'gauss'"},
      {var + "--quantity kc --value-dim 0", "--value-dim"},
      {var + "--quantity kc --value-dim -2", "'-2'"},
      {var + "--values normal", "--quantity"},
      {var + "--sigmaa 1", "did you mean '--sigma'"},
      {var + "--halve_real", "did you mean '--halve-real'"},
      {var + "--threads -1", "'-1'"},
      {var + "--config " + D + "/missing.toml", "missing.toml"},
      {var + "--config " + D + "/syntax.toml", "syntax.toml:2:14"},  // file:line:column
      {swp + "--config " + D + "/syntax.toml", "syntax.toml:2:14"},
      {swp + "--config " + D + "/unknown_key.toml", "did you mean 'sigma'"},
      {swp + "--config " + D + "/section.toml", "[swep]"},
      {swp + "--config " + D + "/underscore.toml", "did you mean 'halve-real'"},
      {swp + "--config " + D + "/toplevel.toml", "outside a section"},
      {swp + "--config " + D + "/wrongtype.toml", "abc"},
      {swp + "--config " + D + "/listvar.toml", "takes one value"},
      {swp + "--config " + D + "/out.toml", "command-line option"},
      {swp + "--regime file", "--x-file"},
      {swp + "--regime file --x-file " + D + "/missing.npy", "missing.npy"},
      {swp + "--regime file --x-file " + D + "/existing.h5", "existing.h5"},
      {swp + "--regime file --x-file " + D + "/good.csv --dim 4,5", "--dim"},
      {swp + "--dim 4,-8", "'-8'"},
      {swp + "--points 16,16", "listed twice"},
      {swp + "--estimators oprf,oprf", "listed twice"},
      {swp + "--seed -1", "'-1'"},
      {swp + "--dim 4 --mc 10 --mc-points 100 --points 16", "--mc-points"},
      {swp + "--points 1000000000", "bytes"},
      {swp + "--dim 4 --points 8 --sigma 1e300", "sigma = 1e+300"},
      {swp + "--dim 4 --points 8 --regime mnist --data-dir " + D, "mnist"},
      {"sweep --quiet --dim 4", "--out"},
      {"reproduce nope --out " + D + "/r", "nope"},
      {"reproduce orf --quick --seed -1 --out " + D + "/r", "'-1'"},
      {"reproduce orf --quick --data-dir " + D + "/nonexistent --out " + D + "/r", "nonexistent"},
      {"datasets --data-dir " + D + "/nonexistent", "nonexistent"},
      {"datasets --bogus", "--bogus"},
      {"varaince --dim 4", "did you mean 'variance'"},
      {"--config " + D + "/x.toml sweep --out " + D + "/c.h5", "options go after it"},
      {"--threads abc variance --quiet", "abc"},
      {"estimators --all", "--all"},
      {adv + "--queries " + D + "/good3.csv", "d = 3 columns but --keys has d = 4"},
      {advq + "--values " + D + "/v39.csv", "one per key expected"},
      {adv + "--queries " + D + "/nan.csv", "'nan'"},
      {adv + "--queries " + D + "/empty.csv", "empty.csv"},
      {adv + "--queries " + D + "/oned.npy", "1 dimensions"},
      {adv + "--queries " + D + "/single.csv", "single.csv"},
      {advq + "--target 0", "--target: expected a number > 0, got '0'"},
      {advq + "--target -1", "'-1'"},
      {advq + "--target nan", "'nan'"},
      {advq + "--budget 0", "--budget"},
      {advq + "--budget 2000000", "'2000000'"},
      {advq + "--rows 1", "--rows"},
      {advq + "--validate 1", "--validate"},
      {advq + "--time-budget -1", "--time-budget: expected seconds in [0, 1e6], got '-1'"},
      {advq + "--time-budget inf", "'inf'"},
      {advq + "--max-draws 1", "--max-draws: expected 0 or a number in [2, 1048576], got '1'"},
      {advq + "--estimators sdrf", "did you mean 'sderf'"},
      {advq + "--samplers halton", "'halton'"},
      {advq + "--kernel gaussian", "quantity kernel"},
      {advq + "--quantity kernel --values " + D + "/good.csv", "values are only used"},
      {advq + "--targte 0.1", "did you mean '--target'"},
      {advq + "--values ''", "--values"},
      {"advise --quiet --queries " + D + "/good.csv --keys " + D + "/good.csv --out " + D + "/existing.h5", "exists"},
      {"advise --quiet --queries " + D + "/good.csv --keys " + D + "/good.csv --out " + D + "/r.png", ".h5"},
      {"advise --quiet --queries " + D + "/good.csv --keys " + D + "/good.csv --out ''", "must not be empty"},
  };
  ASSERT_GE(cases.size(), 50u);
  const auto before = snapshot(dir);
  for (const auto& [args, word] : cases) {
    std::string line = args;
    if (args.rfind("variance", 0) == 0 || args.rfind("sweep", 0) == 0)
      for (const char* def : {"--dim 4", "--points 8", "--pairs 1"})
        if (args.find(std::string(def).substr(0, 6)) == std::string::npos &&
            args.find("--regime file") == std::string::npos)
          line += std::string(" ") + def;
    const CliRun r = run(line, dir);
    EXPECT_EQ(r.code, 2) << line << " -> " << r.err;
    EXPECT_NE(r.err.find(word), std::string::npos) << line << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << line << " -> " << r.err;
    EXPECT_LT(r.err.size(), 400u) << line << " -> " << r.err;  // no 300-digit numbers
    EXPECT_EQ(snapshot(dir), before) << line;                  // nothing created or changed
  }
  // A bare `kestrel` prints the usage and exits 2.
  const CliRun bare = run("", dir);
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.err.find("variance"), std::string::npos) << bare.err;
  fs::remove_all(dir);
}

TEST(Cli, VersionNamesTheRevisionAndLibraries) {
  const fs::path dir = temp_dir("kestrel_version");
  const CliRun r = run("--version", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("kestrel 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("git "), std::string::npos) << r.out;
  for (const char* lib : {"armadillo", "hdf5", "tomlplusplus", "cli11"}) EXPECT_NE(r.out.find(lib), std::string::npos);
  fs::remove_all(dir);
}

TEST(Cli, TomlConfigEqualsTheCommandLine) {
  const fs::path dir = temp_dir("kestrel_cfg");
  write(dir / "v.toml",
        "[variance]\nregime = \"sphere\"\nsigma = [0.5, 1.0]\ndim = 4\npoints = 16\npairs = 1\nseed = 7\n"
        "estimators = [\"pos\", \"oprf\"]\nhalve-real = true\nmc = 8\nmc-points = 4\n");
  const CliRun a = run("variance --quiet --json --config " + (dir / "v.toml").string(), dir);
  const CliRun b =
      run("variance --quiet --json --regime sphere --sigma 0.5,1 --dim 4 --points 16 --pairs 1 --seed 7 "
          "--estimators pos,oprf --halve-real --mc 8 --mc-points 4",
          dir);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["results"], nlohmann::json::parse(b.out)["results"]);
  EXPECT_EQ(nlohmann::json::parse(a.out)["results"][0]["features"], 2);  // halve-real reached pos
  // The command line overrides the file.
  const CliRun c = run("variance --quiet --json --config " + (dir / "v.toml").string() + " --seed 8", dir);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["provenance"]["options"]["seed"], 8);
  fs::remove_all(dir);
}

TEST(Cli, SweepOverOwnDataInEveryFormatAndExtension) {
  const fs::path dir = temp_dir("kestrel_filesweep");
  write(dir / "x.csv", csv_points(24, 3));
  write(dir / "y.csv", csv_points(30, 3).substr(0));
  const arma::mat x = load_points((dir / "x.csv").string())->points, y = load_points((dir / "y.csv").string())->points;
  write_npy(dir / "x.npy", x.t());
  {
    H5Writer h5((dir / "xy.h5").string());
    h5.write("/X", arma::mat(x.t()), {"queries", "point,coordinate"});
    h5.write("/Y", arma::mat(y.t()), {"keys", "point,coordinate"});
    h5.commit();
  }
  const std::string grid = " --sigma 0.5,1 --features 1,4 --pairs 2 --estimators oprf,trig --quiet --json --out ";
  std::vector<nlohmann::json> results;
  for (const std::string& files :
       {"--x-file " + (dir / "x.csv").string() + " --y-file " + (dir / "y.csv").string(),
        "--x-file " + (dir / "x.npy").string() + " --y-file " + (dir / "y.csv").string(),
        "--x-file " + (dir / "xy.h5").string() + ":/X --y-file " + (dir / "xy.h5").string() + ":/Y"}) {
    const fs::path out = dir / fmt::format("s{}.h5", results.size());
    const CliRun r = run("sweep --regime file " + files + grid + out.string(), dir);
    ASSERT_EQ(r.code, 0) << files << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["results"].size(), 8u);
    EXPECT_EQ(j["results"][0]["d"], 3);   // d from the files
    EXPECT_EQ(j["results"][0]["L"], 24);  // L = min(24, 30)
    EXPECT_EQ(j["provenance"]["inputs"]["x_file_sha256"].get<std::string>().size(), 64u);
    results.push_back(j["results"]);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // One file: X and Y are disjoint halves; --points subsamples with the seed.
  const CliRun one =
      run("sweep --regime file --x-file " + (dir / "x.csv").string() + " --points 5" + grid + (dir / "one.h5").string(),
          dir);
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["results"][0]["L"], 5);

  // Extension: the same sweep with one more sigma computes only the new grid points and equals a fresh run.
  const std::string base = "sweep --regime file --x-file " + (dir / "x.csv").string() +
                           " --features 1,4 --pairs 2 --estimators oprf,trig --json --out ";
  ASSERT_EQ(run(base + (dir / "ext.h5").string() + " --sigma 0.5,1", dir).code, 0);
  const CliRun ext = run(base + (dir / "ext.h5").string() + " --sigma 0.5,1,2", dir);
  ASSERT_EQ(ext.code, 0) << ext.err;
  EXPECT_NE(ext.err.find("2 grid points computed, 4 resumed"), std::string::npos) << ext.err;
  const CliRun fresh = run(base + (dir / "fresh.h5").string() + " --sigma 0.5,1,2 --quiet", dir);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(nlohmann::json::parse(ext.out)["results"], nlohmann::json::parse(fresh.out)["results"]);
  EXPECT_FALSE(fs::exists(dir / "ext.h5.parts"));
  // Other non-grid options: not an extension, so replacing the file needs --force, and nothing is reused.
  const CliRun refused = run(base + (dir / "ext.h5").string() + " --sigma 0.5 --seed 9", dir);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  const CliRun other = run(base + (dir / "ext.h5").string() + " --sigma 0.5 --seed 9 --force", dir);
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_NE(other.err.find("2 grid points computed, 0 resumed"), std::string::npos) << other.err;
  fs::remove_all(dir);
}

TEST(Cli, McPointsDefaultsToAtMostL) {
  const fs::path dir = temp_dir("kestrel_mcpoints");
  const CliRun r = run("variance --quiet --json --dim 4 --points 16 --pairs 1 --estimators oprf --mc 8", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["results"][0]["mc"]["points"], 16);
  fs::remove_all(dir);
}
