// Every output says what it is (core/schema.hpp): the schema and version of each file and JSON report the command line
// writes are its row of the table, and the readers (a points file, a sweep's own file) refuse a newer major version.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <hdf5.h>
#include <hdf5_hl.h>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "core/schema.hpp"
#include "io/hdf5.hpp"

namespace fs = std::filesystem;
using kestrel::Output;
using kestrel::test::run;

namespace {

constexpr const char* kStudy = " --sigma 0.5 --dim 4 --points 16 --pairs 1 --estimators oprf --quiet";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void expect_schema(const std::string& h5, Output kind) {
  const kestrel::Schema& s = kestrel::schema_of(kind);
  const kestrel::H5Reader r(h5);
  EXPECT_EQ(r.attr_string("/", "schema"), s.name) << h5;
  EXPECT_EQ(r.attr_string("/", "schema_version"), kestrel::version_text(s)) << h5;
}

void expect_schema(const nlohmann::json& j, Output kind) {
  const kestrel::Schema& s = kestrel::schema_of(kind);
  EXPECT_EQ(j.value("schema", ""), s.name);
  EXPECT_EQ(j.value("schema_version", ""), kestrel::version_text(s));
}

void set_version(const std::string& h5, const char* version) {
  const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << h5;
  ASSERT_GE(H5LTset_attribute_string(f, "/", "schema_version", version), 0);
  H5Fclose(f);
}

// The version as h5py writes a str attribute: a scalar variable-length string.
void set_variable_version(const std::string& h5, const char* version) {
  const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << h5;
  H5Adelete(f, "schema_version");
  const hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
  H5Tset_size(type, H5T_VARIABLE);
  const hid_t a = H5Acreate2(f, "schema_version", type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(a, type, &version), 0);
  H5Aclose(a), H5Sclose(space), H5Tclose(type), H5Fclose(f);
}

// Queries, keys and values of 16 tokens in d = 4 as a capture file (H5Writer: rows are tokens).
void write_capture(const std::string& path, const char* version) {
  kestrel::H5Writer h5(path);
  for (const char* name : {"/Q", "/K", "/V"}) {
    arma::mat tokens(16, 4);
    tokens.imbue([k = 0.0, name]() mutable { return 0.3 * std::sin(++k * name[1]); });
    h5.write(name, tokens, {"tokens of a test capture", "token,feature"});
  }
  h5.attr("/", "schema", kestrel::schema_of(Output::Capture).name);
  h5.attr("/", "schema_version", version);
  h5.commit();
}

}  // namespace

TEST(Schema, TheTableNamesEachOutputOnce) {
  for (const auto& a : kestrel::schemas()) {
    EXPECT_EQ(&kestrel::schema_of(a.output), &a) << a.name;
    EXPECT_EQ(std::string(a.name).rfind("kestrel.", 0), 0u) << a.name;
    EXPECT_GE(a.major, 1) << a.name;
  }
}

TEST(Schema, AReaderRefusesOnlyANewerMajorVersion) {
  const std::string advise = kestrel::schema_of(Output::Advise).name;
  for (const char* ok : {"1.0", "1.17", "0.9"}) EXPECT_NO_THROW(kestrel::check_schema("f", advise, ok)) << ok;
  EXPECT_NO_THROW(kestrel::check_schema("f", "kestrel.not-a-schema", "9.0"));  // not this version's to judge
  EXPECT_NO_THROW(kestrel::check_schema("f", "netcdf", "x"));
  try {
    kestrel::check_schema("'r.h5'", advise, "2.0");
    FAIL() << "a newer major version was read";
  } catch (const kestrel::InputFileError& e) {
    const std::string m = e.what();
    for (const std::string part : std::vector<std::string>{"'r.h5'", advise, "2.0", "1.x"})
      EXPECT_NE(m.find(part), std::string::npos) << m;
  }
  for (const char* bad : {"2", "1.0.0", "", "v1.0", "1.x"})
    EXPECT_THROW(kestrel::check_schema("f", advise, bad), kestrel::InputFileError) << bad;
}

TEST(Schema, EveryFileAndReportOfTheCommandLineSaysWhatItIs) {
  const fs::path dir = kestrel::test::temp_dir("kestrel_schema");
  const std::string v = (dir / "v.h5").string(), s = (dir / "s.h5").string(), a = (dir / "a.h5").string();
  const std::string cap = (dir / "cap.h5").string();
  ASSERT_EQ(run(std::string("variance") + kStudy + " --out " + v).code, 0);
  expect_schema(v, Output::Variance);
  ASSERT_EQ(run(std::string("sweep") + kStudy + " --out " + s).code, 0);
  expect_schema(s, Output::Sweep);
  for (const auto& [cmd, kind] : {std::pair{"variance", Output::Variance}, std::pair{"sweep", Output::Sweep}}) {
    const auto r = run(std::string(cmd) + kStudy + " --json" + (kind == Output::Sweep ? " --out " + s + "2" : ""));
    ASSERT_EQ(r.code, 0) << r.err;
    expect_schema(nlohmann::json::parse(r.out), kind);
  }
  write_capture(cap, "1.0");
  const std::string inputs =
      " --queries " + cap + ":/Q --keys " + cap + ":/K --values " + cap + ":/V --budget 16 --draws 16 --rows 8 --quiet";
  const auto r = run("advise" + inputs + " --json --out " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_schema(nlohmann::json::parse(r.out), Output::Advise);
  expect_schema(a, Output::Advise);
  fs::remove_all(dir);
}

TEST(Schema, ACaptureOfANewerMajorVersionIsRefusedAndNothingIsWritten) {
  const fs::path dir = kestrel::test::temp_dir("kestrel_schema_read");
  const std::string cap = (dir / "cap.h5").string(), out = (dir / "a.h5").string();
  const std::string args = "advise --queries " + cap + ":/Q --keys " + cap + ":/K --values " + cap +
                           ":/V --budget 16 --draws 16 --rows 8 --quiet --out " + out;
  write_capture(cap, "2.0");
  const auto r = run(args);
  EXPECT_EQ(r.code, 2) << r.err;
  for (const std::string part : std::vector<std::string>{cap, "kestrel.capture", "2.0", "1.x"})
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove(cap);
  write_capture(cap, "1.3");  // a newer minor version adds fields: read
  EXPECT_EQ(run(args).code, 0);
  fs::remove(out), fs::remove(dir / "a.png");
  set_variable_version(cap, "2.1");  // as h5py writes it (kestrel.torch.save_hdf5)
  const auto v = run(args);
  EXPECT_EQ(v.code, 2) << v.err;
  EXPECT_NE(v.err.find("version 2.1 is newer"), std::string::npos) << v.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(Schema, ASweepDoesNotResumeIntoAFileOfANewerMajorVersion) {
  const fs::path dir = kestrel::test::temp_dir("kestrel_schema_sweep");
  const std::string out = (dir / "s.h5").string();
  const std::string args = std::string("sweep") + kStudy + " --out " + out;
  ASSERT_EQ(run(args).code, 0);
  set_version(out, "2.0");
  const std::string before = slurp(out);
  const auto r = run(args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("2.0"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out), before);
  fs::remove_all(dir);
}

// The results page reads every NAME.claims.json of the output directory: a broken, foreign or newer one is named, with
// what to do, before any reproduction runs (exit 2, nothing written).
TEST(Schema, AClaimsFileThePageCannotReadIsNamedBeforeAnyReproduction) {
  const fs::path dir = kestrel::test::temp_dir("kestrel_schema_claims");
  const std::string run_args = "reproduce hrf-fig1 --quick --quiet --out " + dir.string();
  const std::string newer = R"({"schema": "kestrel.claims", "schema_version": "9.0", "claims": []})";
  for (const auto& [text, says] : {std::pair<std::string, std::string>{"{\"claims\": [", "not JSON"},
                                   {"[1, 2]", "without a claims list"},
                                   {newer, "version 9.0 is newer"}}) {
    {
      std::ofstream f(dir / "other.claims.json");
      f << text;
    }
    const auto r = run(run_args);
    EXPECT_EQ(r.code, 2) << text << ": " << r.err;
    for (const std::string part : {(dir / "other.claims.json").string(), says})
      EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "hrf-fig1.h5")) << text;
  }
  fs::remove(dir / "other.claims.json");
  EXPECT_EQ(run(run_args).code, 0);
  EXPECT_TRUE(fs::exists(dir / "index.html"));
  fs::remove_all(dir);
}
