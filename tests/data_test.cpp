// Data loaders, preprocessing and regimes: the shipped UCI files and the installed MNIST/CIFAR-10
// against their documented sizes and class counts; a bad-input test per format; regimes' invariants.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/idx.hpp"
#include "data/images.hpp"
#include "data/regimes.hpp"
#include "data/uci.hpp"
#include "frontend/regime_options.hpp"
#include "test_util.hpp"

using namespace kestrel;
namespace fs = std::filesystem;

namespace {
std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::size_t data_bytes) {
  std::vector<std::uint8_t> b = {0, 0, 8, static_cast<std::uint8_t>(dims.size())};
  for (auto v : dims)
    b.insert(b.end(), {std::uint8_t(v >> 24), std::uint8_t(v >> 16), std::uint8_t(v >> 8), std::uint8_t(v)});
  for (std::size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<std::uint8_t>(i));
  return b;
}
template <typename F>
void expect_io_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one containing '" << part << "'";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Idx, ParsesAndRejectsMalformedFiles) {
  const IdxArray a = parse_idx(idx_bytes({2, 3}, 6), "t");
  EXPECT_EQ(a.dims, (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(a.data[5], 5);
  expect_io_error([] { parse_idx(std::vector<std::uint8_t>{0, 0}, "f.idx"); }, "f.idx: IDX: file is 2 bytes");
  auto bad_magic = idx_bytes({2}, 2);
  bad_magic[1] = 7;
  expect_io_error([&] { parse_idx(bad_magic, "f"); }, "bad magic number");
  auto bad_type = idx_bytes({2}, 2);
  bad_type[2] = 0x0D;
  expect_io_error([&] { parse_idx(bad_type, "f"); }, "unsupported element type 0x0d");
  auto bad_nd = idx_bytes({2}, 2);
  bad_nd[3] = 9;
  expect_io_error([&] { parse_idx(bad_nd, "f"); }, "number of dimensions is 9");
  expect_io_error(
      [] {
        parse_idx(idx_bytes({4, 4}, 15), "f");
      },
      "truncated: header declares 16 data bytes, file has 15");
  expect_io_error([] { parse_idx(idx_bytes({4}, 6), "f"); }, "2 unexpected bytes");
  expect_io_error([] { parse_idx(idx_bytes({100000, 100000, 100000}, 0), "f"); }, "exceeds");
}

TEST(Cifar, ParsesAndRejectsMalformedFiles) {
  std::vector<std::uint8_t> b(2 * 3073, 7);
  b[0] = 3;
  b[3073] = 9;
  const CifarBatch c = parse_cifar(b, "x.bin");
  EXPECT_EQ(c.labels, (std::vector<std::uint8_t>{3, 9}));
  EXPECT_EQ(c.pixels.size(), 2u * 3072);
  b.pop_back();
  expect_io_error([&] { parse_cifar(b, "x.bin"); }, "x.bin: CIFAR-10: wrong record size");
  std::vector<std::uint8_t> bad_label(3073, 0);
  bad_label[0] = 10;
  expect_io_error([&] { parse_cifar(bad_label, "y.bin"); }, "record 0: label 10");
  expect_io_error([] { parse_cifar({}, "z.bin"); }, "empty");
}

TEST(Uci, ShippedDataSetsHaveTheirDocumentedShape) {
  // Rows and classes as documented by UCI (datasets/uci/INDEX.txt, the PROVENANCE files).
  const std::map<std::string, std::pair<arma::uword, std::size_t>> expected = {
      {"abalone", {4177, 28}}, {"banknote", {1372, 2}}, {"car", {1728, 4}},  {"yeast", {1484, 10}},
      {"cmc", {1473, 3}},      {"nursery", {12960, 5}}, {"wifi", {2000, 4}}, {"chess", {28056, 18}},
      {"wine", {178, 3}},      {"boston", {506, 0}}};
  for (const auto& [name, shape] : expected) {
    const UciData d = load_uci(default_data_dir(), name);
    EXPECT_EQ(d.X.n_cols, shape.first) << name;
    EXPECT_EQ(d.classes.size(), shape.second) << name;
    EXPECT_TRUE(d.X.is_finite()) << name;
  }
  // car: 6 categorical attributes with 4, 4, 4, 3, 3, 3 values -> 21 one-hot columns, 6 ordinal.
  EXPECT_EQ(load_uci(default_data_dir(), "car", Encoding::OneHot).X.n_rows, 21u);
  EXPECT_EQ(load_uci(default_data_dir(), "car", Encoding::Ordinal).X.n_rows, 6u);
  // chess ordinal: files a..h -> 0..7, ranks 1..8 as numbers. The white king is confined to files
  // a..d by the board's symmetry (krkopt.names), the rook ranges over a..h.
  const UciData chess = load_uci(default_data_dir(), "chess", Encoding::Ordinal);
  EXPECT_EQ(chess.X.row(0).max(), 3.0);
  EXPECT_EQ(chess.X.row(2).max(), 7.0);
  EXPECT_EQ(chess.X.row(1).min(), 1.0);
  // boston: a regression target (MEDV), 13 attributes.
  const UciData boston = load_uci(default_data_dir(), "boston");
  EXPECT_EQ(boston.X.n_rows, 13u);
  EXPECT_EQ(boston.target.n_elem, 506u);
}

TEST(Uci, CrlfAndLfFilesParseIdentically) {
  const UciSpec& spec = find_uci("wifi");
  auto read = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const std::string dir = default_data_dir() + "/uci/wifi/";
  const UciData crlf = parse_uci(read(dir + "wifi_localization.txt"), spec, Encoding::OneHot, "crlf");
  const UciData lf = parse_uci(read(dir + "wifi_localization.LF.txt"), spec, Encoding::OneHot, "lf");
  EXPECT_TRUE(arma::approx_equal(crlf.X, lf.X, "absdiff", 0.0));
  EXPECT_TRUE(arma::all(crlf.labels == lf.labels));
}

TEST(Uci, BadInputNamesFileLineAndProblem) {
  const UciSpec spec{"t", "t.csv", ',', {UciColumn::Numeric, UciColumn::Categorical, UciColumn::Class}};
  expect_io_error([&] { parse_uci("1,a,x\n2,b\n", spec, Encoding::OneHot, "t.csv"); },
                  "t.csv: line 2: 2 fields, expected 3");
  expect_io_error([&] { parse_uci("1,a,x\nzz,b,y\n", spec, Encoding::OneHot, "t.csv"); },
                  "t.csv: line 2: field 1 is not a finite number: 'zz'");
  expect_io_error([&] { parse_uci("1,a,x\n2,?,y\n", spec, Encoding::OneHot, "t.csv"); },
                  "line 2: field 2 is a missing value");
  expect_io_error([&] { parse_uci("1,a,x\n2,,y\n", spec, Encoding::OneHot, "t.csv"); }, "line 2: field 2 is empty");
  expect_io_error([&] { parse_uci("1,a,x\n", spec, Encoding::OneHot, "t.csv"); }, "1 data rows");
  expect_io_error([&] { parse_uci("1,a,x\ninf,b,y\n", spec, Encoding::OneHot, "t.csv"); }, "not a finite number");
  expect_io_error([&] { parse_uci("1,a,x\r\n\r\n2e400,b,y\r\n", spec, Encoding::OneHot, "t.csv"); },
                  "line 3: field 1 is not a finite number");
  EXPECT_THROW(load_uci("/nonexistent", "car"), IoError);
  EXPECT_THROW(find_uci("iris"), InvalidArgument);
  EXPECT_THROW(parse_encoding("binary"), InvalidArgument);
}

TEST(Uci, SplitIsDisjointCompleteAndSeeded) {
  const Split s = split_90_5_5(1000, 4);
  EXPECT_EQ(s.train.n_elem, 900u);
  EXPECT_EQ(s.validation.n_elem, 50u);
  EXPECT_EQ(s.test.n_elem, 50u);
  const arma::uvec all = arma::sort(arma::join_cols(arma::join_cols(s.train, s.validation), s.test));
  EXPECT_TRUE(arma::all(all == arma::regspace<arma::uvec>(0, 999)));
  EXPECT_TRUE(arma::all(split_90_5_5(1000, 4).test == s.test));
  EXPECT_FALSE(arma::all(split_90_5_5(1000, 5).test == s.test));
  EXPECT_THROW(split_90_5_5(10, 1), InvalidArgument);
}

TEST(Uci, StandardizerUsesTrainingStatisticsOnly) {
  arma::mat train = {{1, 2, 3, 4}, {5, 5, 5, 5}};
  const Standardizer st = Standardizer::fit(train);
  const arma::mat z = st.apply(train);
  EXPECT_NEAR(arma::mean(z.row(0)), 0.0, 1e-15);
  EXPECT_NEAR(arma::stddev(z.row(0)), 1.0, 1e-15);
  EXPECT_TRUE(arma::all(z.row(1) == 0.0));  // constant feature: centred only
  const arma::mat other = st.apply(arma::mat(arma::colvec{10.0, 6.0}));
  EXPECT_NEAR(other(0, 0), (10 - 2.5) / arma::stddev(train.row(0)), 1e-12);
  EXPECT_EQ(other(1, 0), 1.0);
}

TEST(Images, AreaDownscaleIsExactBoxFilter) {
  arma::mat img = arma::reshape(arma::regspace(0, 15), 4, 4);
  const arma::mat half = downscale_area(img, 2, 2);  // integer factor: 2 x 2 block means
  EXPECT_DOUBLE_EQ(half(0, 0), arma::mean(arma::vectorise(img.submat(0, 0, 1, 1))));
  EXPECT_DOUBLE_EQ(half(1, 1), arma::mean(arma::vectorise(img.submat(2, 2, 3, 3))));
  // Fractional factor 7 -> 2: output cell 0 covers rows 0, 1, 2 and half of row 3.
  arma::mat col7 = arma::regspace(1, 7) * arma::ones<arma::rowvec>(1);
  const arma::mat c2 = downscale_area(col7, 2, 1);
  EXPECT_NEAR(c2(0, 0), (1 + 2 + 3 + 0.5 * 4) / 3.5, 1e-14);
  EXPECT_NEAR(c2(1, 0), (0.5 * 4 + 5 + 6 + 7) / 3.5, 1e-14);
  // 28 -> 8 keeps the mean of any image and a constant image constant.
  arma::mat r = arma::abs(test::points(28, 28, 1.0, 77));  // fixed seed
  EXPECT_NEAR(arma::mean(arma::vectorise(downscale_area(r, 8, 8))), arma::mean(arma::vectorise(r)), 1e-14);
  EXPECT_TRUE(arma::approx_equal(downscale_area(arma::mat(28, 28, arma::fill::value(0.3)), 8, 8),
                                 arma::mat(8, 8, arma::fill::value(0.3)), "absdiff", 1e-15));
}

// The resize kernels against hand-computed 4 -> 2 cases, and their invariants (rows sum to 1, so a constant
// image stays constant; bilinear without antialiasing uses 2 input pixels per output pixel).
TEST(Images, BilinearResizeKernels) {
  arma::mat img(4, 4);
  for (arma::uword r = 0; r < 4; ++r)
    for (arma::uword c = 0; c < 4; ++c) img(r, c) = 4.0 * r + c;
  // Bilinear, factor 2: sample points 0.5 and 2.5 split evenly between pixels (0, 1) and (2, 3).
  const arma::mat b = downscale(img, 2, 2, Resize::Bilinear);
  EXPECT_NEAR(b(0, 0), 2.5, 1e-14);
  EXPECT_NEAR(b(0, 1), 4.5, 1e-14);
  EXPECT_NEAR(b(1, 0), 10.5, 1e-14);
  EXPECT_NEAR(b(1, 1), 12.5, 1e-14);
  // Antialiased, factor 2: the tent of half-width 2 around centre 1 weighs pixels 0..3 by .75, .75, .25, 0
  // (normalised by 1.75): mean row 5/7 and mean column 5/7 for output (0, 0); 16/7 for output index 1.
  const arma::mat a = downscale(img, 2, 2, Resize::BilinearAA);
  EXPECT_NEAR(a(0, 0), 4 * 5.0 / 7 + 5.0 / 7, 1e-14);
  EXPECT_NEAR(a(1, 0), 4 * 16.0 / 7 + 5.0 / 7, 1e-14);
  EXPECT_NEAR(a(1, 1), 4 * 16.0 / 7 + 16.0 / 7, 1e-14);
  // 28 -> 8 bilinear: output 0 samples 1.25 (0.75 on pixel 1, 0.25 on pixel 2), output 7 samples 25.75.
  const arma::mat W = resize_weights(28, 8, Resize::Bilinear);
  EXPECT_NEAR(W(0, 1), 0.75, 1e-15);
  EXPECT_NEAR(W(0, 2), 0.25, 1e-15);
  EXPECT_NEAR(W(7, 25), 0.25, 1e-15);
  EXPECT_NEAR(W(7, 26), 0.75, 1e-15);
  for (Resize m : {Resize::Area, Resize::Bilinear, Resize::BilinearAA})
    for (auto [in, out] : {std::pair<arma::uword, arma::uword>{28, 8}, {32, 8}, {7, 3}, {5, 5}, {9, 1}}) {
      const arma::mat w = resize_weights(in, out, m);
      EXPECT_LT(arma::abs(arma::sum(w, 1) - 1.0).max(), 1e-14) << to_string(m) << " " << in << "->" << out;
      EXPECT_GE(w.min(), 0.0);
      if (m == Resize::Bilinear) EXPECT_TRUE(arma::all(arma::sum(w > 0, 1) <= 2));
      EXPECT_TRUE(arma::approx_equal(downscale(arma::mat(in, in, arma::fill::value(0.3)), out, out, m),
                                     arma::mat(out, out, arma::fill::value(0.3)), "absdiff", 1e-15));
    }
  // Equal sizes: bilinear and area are the identity.
  EXPECT_TRUE(arma::approx_equal(resize_weights(5, 5, Resize::Bilinear), arma::eye(5, 5), "absdiff", 1e-15));
  // The antialiased tent spans 2 x 3.5 input pixels at 28 -> 8: 7 or 8 pixels per output pixel.
  EXPECT_GE(arma::accu(resize_weights(28, 8, Resize::BilinearAA).row(3) > 0), 7u);
  EXPECT_THROW(resize_weights(4, 5, Resize::Bilinear), InvalidArgument);
  EXPECT_THROW(resize_weights(4, 0, Resize::BilinearAA), InvalidArgument);
  EXPECT_EQ(parse_resize("bilinear-aa"), Resize::BilinearAA);
  EXPECT_THROW(parse_resize("bicubic"), InvalidArgument);
}

// The preprocessing forms on real MNIST: global standardisation gives one mean 0 / std 1 over the pool,
// mnist-norm is (x - 0.1307) / 0.3081 of the raw pixels, and the MNIST constants are the full-resolution
// training-set statistics (which is how other sets get theirs).
TEST(Regimes, ImagePipelines) {
  const ImageSet m = load_mnist(default_data_dir() + "/mnist", "train");
  const auto [mean, sd] = pixel_mean_std(m);
  EXPECT_NEAR(mean, 0.1307, 5e-5);
  EXPECT_NEAR(sd, 0.3081, 5e-5);
  RegimeOptions raw, glob, norm, r255, bil;
  glob.preprocess = Preprocess::StandardizeGlobal;
  norm.preprocess = Preprocess::MnistNorm;
  r255.pixel_scale = 255;
  bil.resize = Resize::Bilinear;
  const SetPair a = draw_regime({.name = "mnist", .dim = 64, .points = 500, .sigma = 1.0, .seed = 3, .options = raw}),
                n = draw_regime({.name = "mnist", .dim = 64, .points = 500, .sigma = 1.0, .seed = 3, .options = norm}),
                s = draw_regime({.name = "mnist", .dim = 64, .points = 500, .sigma = 1.0, .seed = 3, .options = r255}),
                b = draw_regime({.name = "mnist", .dim = 64, .points = 500, .sigma = 1.0, .seed = 3, .options = bil});
  EXPECT_TRUE(arma::approx_equal(n.X, (a.X - 0.1307) / 0.3081, "absdiff", 1e-12));
  EXPECT_TRUE(arma::approx_equal(s.X, 255 * a.X, "absdiff", 1e-10));
  EXPECT_FALSE(arma::approx_equal(b.X, a.X, "absdiff", 1e-3));  // a different kernel, a different cache entry
  const SetPair g = draw_regime({.name = "mnist",
                                 .dim = 64,
                                 .points = 30000,
                                 .sigma = 1.0,
                                 .seed = 3,
                                 .options = glob});  // the whole pool: exact moments
  const arma::vec all = arma::join_cols(arma::vectorise(g.X), arma::vectorise(g.Y));
  // Sums of 3.8e6 doubles: rounding of order 1e-11.
  EXPECT_NEAR(arma::mean(all), 0.0, 1e-9);
  EXPECT_NEAR(std::sqrt(arma::mean(arma::square(all))), 1.0, 1e-9);
  EXPECT_EQ(pipeline_name(r255), "raw/area/255");
  EXPECT_EQ(pipeline_name(glob), "standardize-global/area");
  EXPECT_EQ(parse_preprocess("mnist-norm"), Preprocess::MnistNorm);
  EXPECT_THROW(parse_preprocess("standardise"), InvalidArgument);
  RegimeOptions bad;
  bad.pixel_scale = 2;
  EXPECT_THROW(draw_regime({.name = "mnist", .dim = 64, .points = 10, .sigma = 1.0, .seed = 1, .options = bad}),
               InvalidArgument);
}

TEST(Images, RealMnistAndCifarHaveTheirDocumentedClassCounts) {
  // Installed by scripts/install-data.sh (the test command runs it).
  const ImageSet m = load_mnist(default_data_dir() + "/mnist", "train");
  ASSERT_EQ(m.images.size(), 60000u);
  EXPECT_EQ(m.rows, 28u);
  std::vector<int> counts(10, 0);
  for (auto l : m.labels) ++counts.at(l);
  // The published MNIST training-set class counts.
  EXPECT_EQ(counts, (std::vector<int>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}));
  const ImageSet c = load_cifar10(default_data_dir() + "/cifar10", "test");
  ASSERT_EQ(c.images.size(), 10000u);
  std::vector<int> cc(10, 0);
  for (auto l : c.labels) ++cc.at(l);
  EXPECT_EQ(cc, std::vector<int>(10, 1000));
  const arma::mat P = image_points(c, 64);
  EXPECT_EQ(P.n_rows, 64u);
  EXPECT_GE(P.min(), 0.0);
  EXPECT_LE(P.max(), 1.0);
  EXPECT_THROW(image_points(c, 50), InvalidArgument);
  EXPECT_THROW(load_mnist(default_data_dir() + "/mnist", "val"), InvalidArgument);
}

TEST(Regimes, ImageRegimesDrawDisjointSetsAndPreprocess) {
  for (const char* r : {"mnist", "cifar10", "mnist/cifar10", "fashion-mnist"}) {
    const SetPair p = draw_regime({.name = r, .dim = 64, .points = 300, .sigma = 0.5, .seed = 1});
    EXPECT_EQ(p.X.n_cols, 300u);
    for (arma::uword i = 0; i < p.X.n_cols; ++i)
      for (arma::uword j = 0; j < p.Y.n_cols; ++j)
        ASSERT_FALSE(arma::approx_equal(p.X.col(i), p.Y.col(j), "absdiff", 0.0)) << r;
    EXPECT_GE(p.X.min(), 0.0);
    EXPECT_LE(p.X.max(), 0.5);  // raw pixels in [0, 1] times sigma
  }
  RegimeOptions centred;
  centred.preprocess = Preprocess::Center;
  const SetPair c =
      draw_regime({.name = "mnist", .dim = 64, .points = 2000, .sigma = 1.0, .seed = 1, .options = centred});
  EXPECT_LT(c.X.min(), 0.0);  // centred pixels take both signs
  EXPECT_THROW(draw_regime({.name = "mnist", .dim = 50, .points = 10, .sigma = 1.0, .seed = 1}), InvalidArgument);
  RegimeOptions missing;
  missing.data_dir = "/nonexistent";
  expect_io_error(
      [&] { draw_regime({.name = "mnist", .dim = 64, .points = 10, .sigma = 1.0, .seed = 1, .options = missing}); },
      "install-data.sh");
}

TEST(Regimes, AnisotropicSpectrumAndRank) {
  const arma::vec g = parse_spectrum("geometric:100", 8);
  EXPECT_NEAR(g.max() / g.min(), 100.0, 1e-9);
  EXPECT_NEAR(arma::mean(g), 1.0, 1e-14);
  RegimeOptions o;
  o.spectrum = "rank:3";
  const SetPair p = draw_regime({.name = "aniso", .dim = 8, .points = 50, .sigma = 2.0, .seed = 1, .options = o});
  EXPECT_EQ(arma::rank(p.X), 3u);
  // E|x|^2 = sigma^2 trace(Lambda) = sigma^2 d: check the mean over 4000 points within 4.5 SE.
  o.spectrum = "geometric:50";
  const SetPair q = draw_regime({.name = "aniso", .dim = 8, .points = 4000, .sigma = 2.0, .seed = 1, .options = o});
  const arma::rowvec n2 = arma::sum(arma::square(q.X), 0);
  EXPECT_LT(std::abs(arma::mean(n2) - 4.0 * 8), 4.5 * arma::stddev(n2) / std::sqrt(4000.0));
  EXPECT_THROW(parse_spectrum("geometric:0.5", 4), InvalidArgument);
  EXPECT_THROW(parse_spectrum("rank:9", 8), InvalidArgument);
  EXPECT_THROW(parse_spectrum("list:1,2", 3), InvalidArgument);
  EXPECT_THROW(parse_spectrum("zipf:2", 3), InvalidArgument);
}

TEST(Regimes, ClusteredAndFileRegimes) {
  RegimeOptions o;
  o.clusters = 2;
  o.cluster_radius = 5.0;
  const SetPair p = draw_regime({.name = "clustered", .dim = 10, .points = 100, .sigma = 0.1, .seed = 2, .options = o});
  // Points sit within a few sigma of a centre at radius 5.
  const arma::rowvec nx = arma::sqrt(arma::sum(arma::square(p.X), 0));
  EXPECT_GT(nx.min(), 4.0);
  EXPECT_LT(nx.max(), 6.0);
  const fs::path f = fs::temp_directory_path() / "kestrel_points_test.csv";
  {
    std::ofstream out(f);
    for (int i = 0; i < 40; ++i) out << i << "," << -i << "," << 0.5 * i << "\n";
  }
  o.x_file = f.string();
  const SetPair q = draw_regime({.name = "file", .dim = 3, .points = 20, .sigma = 2.0, .seed = 3, .options = o});
  EXPECT_EQ(q.X.n_cols, 20u);
  EXPECT_EQ(arma::accu(q.X.row(0) + q.X.row(1)), 0.0);  // rows (i, -i, i/2) times sigma
  EXPECT_THROW(draw_regime({.name = "file", .dim = 4, .points = 20, .sigma = 1.0, .seed = 3, .options = o}),
               InvalidArgument);  // d mismatch
  EXPECT_THROW(draw_regime({.name = "file", .dim = 3, .points = 21, .sigma = 1.0, .seed = 3, .options = o}),
               InvalidArgument);  // 42 > 40 rows
  fs::remove(f);
  EXPECT_THROW(draw_regime({.name = "moon", .dim = 3, .points = 2, .sigma = 1.0, .seed = 1}), InvalidArgument);
  EXPECT_THROW(parse_preprocess("whiten"), InvalidArgument);
}

TEST(Catalog, VerifiesChecksumsAndNamesMismatches) {
  const auto sets = data_status(default_data_dir(), false);
  EXPECT_GE(sets.size(), 13u);
  const fs::path dir = fs::temp_directory_path() / "kestrel_catalog_test";
  fs::create_directories(dir / "uci" / "toy");
  { std::ofstream(dir / "uci" / "toy" / "a.txt") << "hello\n"; }
  {
    std::ofstream m(dir / "CHECKSUMS.sha256");
    // sha256("hello\n") computed by coreutils, and a deliberately wrong one for b.txt
    m << "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  uci/toy/a.txt\n";
    m << std::string(64, '0') << "  uci/toy/b.txt\n";
  }
  auto st = data_status(dir.string(), true);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_TRUE(st[0].files[0].ok());
  EXPECT_FALSE(st[0].files[1].present);
  EXPECT_FALSE(st[0].installed());
  fs::remove_all(dir);
  EXPECT_THROW(data_status("/nonexistent", false), IoError);
}

// The regimes' registry: names unique and spelled as options are (lowercase, digits, '-', '/'), each with help and a
// draw; regime_names() and the errors come from it; the synthetic regimes draw d x L sets at the seed's stream.
TEST(Regimes, TheRegistryNamesEachRegimeOnceAndDrawsIt) {
  std::set<std::string> seen;
  ASSERT_EQ(regimes().size(), regime_names().size());
  for (std::size_t k = 0; k < regimes().size(); ++k) {
    const Regime& r = regimes()[k];
    SCOPED_TRACE(r.name);
    EXPECT_EQ(regime_names()[k], r.name);
    EXPECT_TRUE(seen.insert(r.name).second);
    EXPECT_FALSE(r.name.empty());
    for (const char c : r.name) EXPECT_TRUE(std::islower(c) || std::isdigit(c) || c == '-' || c == '/') << c;
    EXPECT_FALSE(r.help.empty());
    EXPECT_NE(r.draw, nullptr);
    EXPECT_EQ(&find_regime(r.name), &r);
    for (const std::string& o : r.options) EXPECT_TRUE(find_option(regime_option_table(), o) != nullptr) << o;
  }
  EXPECT_THROW(find_regime("gaussian"), InvalidArgument);
  EXPECT_THROW(validate_regime("mnist-2"), InvalidArgument);
  try {
    find_regime("nope");
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("normal, sphere, heterogen"), std::string::npos) << e.what();
  }
  for (const std::string name : {"normal", "sphere", "heterogen", "aniso", "clustered"}) {
    const SetPair a = draw_regime({.name = name, .dim = 5, .points = 7, .sigma = 0.5, .seed = 3, .pair_index = 1});
    const SetPair b = draw_regime({.name = name, .dim = 5, .points = 7, .sigma = 0.5, .seed = 3, .pair_index = 1});
    EXPECT_EQ(a.X.n_rows, 5u);
    EXPECT_EQ(a.Y.n_cols, 7u);
    EXPECT_TRUE(arma::approx_equal(a.X, b.X, "absdiff", 0.0) && arma::approx_equal(a.Y, b.Y, "absdiff", 0.0)) << name;
    EXPECT_FALSE(find_regime(name).images);
  }
  // sphere: radius sigma; heterogen: Y's mean sigma (unit-scale draws times sigma).
  const SetPair s = draw_regime({.name = "sphere", .dim = 5, .points = 7, .sigma = 0.5, .seed = 3});
  EXPECT_TRUE(arma::approx_equal(arma::sqrt(arma::sum(arma::square(s.X), 0)), arma::rowvec(7, arma::fill::value(0.5)),
                                 "absdiff", 1e-15));
  for (const std::string name : {"mnist", "fashion-mnist", "cifar10", "mnist/cifar10"})
    EXPECT_TRUE(find_regime(name).images) << name;
}
