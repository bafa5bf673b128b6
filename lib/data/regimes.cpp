// Sampling regimes (see regimes.hpp).
#include "data/regimes.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include <gsl/gsl_randist.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "data/catalog.hpp"
#include "data/images.hpp"
#include "data/points_file.hpp"
#include "data/uci.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

double validate_pixel_scale(double scale) {
  require(scale == 1 || scale == 255, "pixel scale must be 1 or 255, got {}", scale);
  return scale;
}

namespace {
bool scale_matters(Preprocess p) { return p == Preprocess::Raw || p == Preprocess::Center; }
}  // namespace

std::string pipeline_name(const RegimeOptions& o) {
  const std::string base = to_string(o.preprocess) + "/" + to_string(o.resize);
  return scale_matters(o.preprocess) ? fmt::format("{}/{}", base, o.pixel_scale) : base;
}

nlohmann::json regime_inputs(const RegimeOptions& o, bool images) {
  nlohmann::json j = nlohmann::json::object();
  if (images) j["data_dir"] = o.data_dir.empty() ? default_data_dir() : o.data_dir;
  if (!o.x_file.empty()) j["x_file_sha256"] = load_points(o.x_file)->sha256;
  if (!o.y_file.empty()) j["y_file_sha256"] = load_points(o.y_file)->sha256;
  return j;
}

FileShape file_regime_shape(const RegimeOptions& o) {
  require(!o.x_file.empty(), "regime 'file' needs --x-file");
  const auto x = load_points(o.x_file);
  if (o.y_file.empty()) return {x->points.n_rows, x->points.n_cols / 2};
  const auto y = load_points(o.y_file);
  require(y->points.n_rows == x->points.n_rows, "--y-file {} has points of dimension {}, --x-file {} of dimension {}",
          o.y_file, y->points.n_rows, o.x_file, x->points.n_rows);
  return {x->points.n_rows, std::min(x->points.n_cols, y->points.n_cols)};
}

const std::vector<std::string>& regime_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Regime& r : regimes()) n.push_back(r.name);
    return n;
  }();
  return names;
}

const Regime& find_regime(const std::string& name) {
  for (const Regime& r : regimes())
    if (r.name == name) return r;
  std::string known;
  for (const auto& n : regime_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidArgument(fmt::format("unknown regime '{}' (known: {})", name, known));
}

void validate_regime(const std::string& name) { find_regime(name); }

arma::vec parse_spectrum(const std::string& spec, arma::uword d) {
  const auto colon = spec.find(':');
  require(colon != std::string::npos, "spectrum must be geometric:<k>, rank:<r> or list:<values>, got '{}'", spec);
  const std::string kind = spec.substr(0, colon), arg = spec.substr(colon + 1);
  auto num = [&](const std::string& s) {
    std::size_t pos = 0;
    double v = std::nan("");
    try {
      v = std::stod(s, &pos);
    } catch (const std::exception&) {
    }
    require(pos == s.size() && std::isfinite(v), "spectrum '{}': '{}' is not a number", spec, s);
    return v;
  };
  arma::vec lam(d);
  if (kind == "geometric") {
    const double k = num(arg);
    require(k >= 1, "spectrum condition number must be >= 1, got {}", k);
    for (arma::uword i = 0; i < d; ++i) lam(i) = d > 1 ? std::pow(k, -static_cast<double>(i) / (d - 1)) : 1.0;
  } else if (kind == "rank") {
    const double r = num(arg);
    require(r >= 1 && r <= d && r == std::floor(r), "spectrum rank must be an integer in 1..{}, got {}", d, r);
    lam.zeros();
    lam.head(static_cast<arma::uword>(r)).ones();
  } else if (kind == "list") {
    std::vector<double> v;
    std::stringstream ss(arg);
    std::string tok;
    while (std::getline(ss, tok, ',')) v.push_back(num(tok));
    require(v.size() == d, "spectrum list has {} values, d = {}", v.size(), d);
    lam = arma::vec(v);
    require(lam.min() >= 0, "spectrum values must be >= 0, got {}", lam.min());
    return lam;
  } else {
    throw InvalidArgument(fmt::format("unknown spectrum kind '{}' (expected geometric, rank or list)", kind));
  }
  return lam * (d / arma::accu(lam));  // mean eigenvalue 1, so sigma sets the overall scale
}

arma::mat load_points_file(const std::string& path) { return load_points(path)->points; }

namespace {

// Image pools are loaded and preprocessed once per process.
std::shared_ptr<const arma::mat> image_pool(const std::string& set, arma::uword d, const RegimeOptions& o) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const arma::mat>> cache;
  const std::string dir = (o.data_dir.empty() ? default_data_dir() : o.data_dir) + "/" + set;
  validate_pixel_scale(o.pixel_scale);
  const std::string key =
      fmt::format("{}|{}|{}|{}|{}", dir, d, to_string(o.preprocess), to_string(o.resize), o.pixel_scale);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  ImageSet s;
  try {
    s = set == "cifar10" ? load_cifar10(dir, "train") : load_mnist(dir, "train");
  } catch (const IoError& e) {
    throw InputFileError(fmt::format("{} (install the data with scripts/install-data.sh {})", e.what(), set));
  }
  arma::mat P = image_points(s, d, o.resize);
  if (scale_matters(o.preprocess) && o.pixel_scale != 1) P *= o.pixel_scale;
  if (o.preprocess == Preprocess::Center || o.preprocess == Preprocess::Standardize) {
    P.each_col() -= arma::mean(P, 1);
    if (o.preprocess == Preprocess::Standardize) {
      arma::vec sd = arma::stddev(P, 0, 1);
      sd.transform([](double v) { return v > 0 ? v : 1.0; });  // constant pixels stay 0
      P.each_col() /= sd;
    }
  } else if (o.preprocess == Preprocess::StandardizeGlobal) {
    const double mean = arma::mean(arma::vectorise(P));
    P -= mean;
    const double sd = std::sqrt(arma::accu(arma::square(P)) / static_cast<double>(P.n_elem));
    require(sd > 0, "{}: every pixel of the pool is {}, standardize-global needs some spread", dir, mean);
    P /= sd;
  } else if (o.preprocess == Preprocess::MnistNorm) {
    // torchvision's MNIST constants; any other set gets its own full-resolution constants, the way they were made.
    const auto [mean, sd] = set == "mnist" ? std::pair<double, double>{0.1307, 0.3081} : pixel_mean_std(s);
    require(sd > 0, "{}: every pixel is {}, mnist-norm needs some spread", dir, mean);
    P = (P - mean) / sd;
  }
  auto ptr = std::make_shared<const arma::mat>(std::move(P));
  cache[key] = ptr;
  return ptr;
}

// k distinct indices out of n (partial Fisher-Yates via GSL).
std::vector<std::size_t> distinct(std::size_t n, std::size_t k, Rng& rng) {
  std::vector<std::size_t> all(n), out(k);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  gsl_ran_choose(rng.raw(), out.data(), k, all.data(), n, sizeof(std::size_t));
  gsl_ran_shuffle(rng.raw(), out.data(), k, sizeof(std::size_t));
  return out;
}

arma::mat pick(const arma::mat& pool, const std::vector<std::size_t>& idx, std::size_t from, std::size_t count) {
  arma::mat out(pool.n_rows, count);
  for (std::size_t i = 0; i < count; ++i) out.col(i) = pool.col(idx[from + i]);
  return out;
}

SetPair from_pools(const arma::mat& px, const arma::mat* py, arma::uword L, Rng& rng, const std::string& what) {
  if (py == nullptr) {
    require(px.n_cols >= 2 * L, "{} has {} points, {} disjoint ones are needed for L = {}", what, px.n_cols, 2 * L, L);
    const auto idx = distinct(px.n_cols, 2 * L, rng);
    return {pick(px, idx, 0, L), pick(px, idx, L, L)};
  }
  require(px.n_cols >= L && py->n_cols >= L, "{}: pools have {} and {} points, L = {}", what, px.n_cols, py->n_cols, L);
  const auto ix = distinct(px.n_cols, L, rng), iy = distinct(py->n_cols, L, rng);
  return {pick(px, ix, 0, L), pick(*py, iy, 0, L)};
}

// Largest |x|^2 of the columns of X and Y.
double largest_norm2(const SetPair& p) {
  return std::max(arma::max(arma::sum(arma::square(p.X), 0)), arma::max(arma::sum(arma::square(p.Y), 0)));
}

// The points scaled by sigma within kMaxScaledNorm2, or a refusal naming the user's option: the points file when its
// points alone (at sigma = 1) are too large as well, else sigma.
void require_representable(const SetPair& p, double sigma, const std::string& file = "", double file_norm2 = 0) {
  const double m = largest_norm2(p);
  if (std::isfinite(m) && m < kMaxScaledNorm2) return;
  require(file.empty() || (std::isfinite(file_norm2) && file_norm2 < kMaxScaledNorm2),
          "the points in {} are too large: the largest |x|^2 is {}{} (at most {:g} is supported); divide them by a "
          "constant",
          file, std::isfinite(file_norm2) ? fmt::format("{:g}", file_norm2) : "beyond a double's range",
          sigma == 1 ? "" : fmt::format(", {:g} at sigma = {}", m, sigma), kMaxScaledNorm2);
  throw InvalidArgument(fmt::format(
      "sigma = {} is too large for these points: the largest scaled |x|^2 is {:g} (at most {:g} is supported)", sigma,
      m, kMaxScaledNorm2));
}

SetPair draw_normal(const RegimeSpec& s, Rng& rng) {
  return {rng.normal_matrix(s.dim, s.points), rng.normal_matrix(s.dim, s.points)};
}

SetPair draw_sphere(const RegimeSpec& s, Rng& rng) {
  SetPair p = draw_normal(s, rng);
  p.X.each_row() /= arma::sqrt(arma::sum(arma::square(p.X), 0));
  p.Y.each_row() /= arma::sqrt(arma::sum(arma::square(p.Y), 0));
  return p;
}

SetPair draw_heterogen(const RegimeSpec& s, Rng& rng) {
  SetPair p = draw_normal(s, rng);
  p.Y += 1.0;
  return p;
}

SetPair draw_images(const RegimeSpec& s, Rng& rng) {
  return from_pools(*image_pool(s.name, s.dim, s.options), nullptr, s.points, rng, s.name);
}

SetPair draw_mnist_cifar10(const RegimeSpec& s, Rng& rng) {
  const auto mx = image_pool("mnist", s.dim, s.options), cy = image_pool("cifar10", s.dim, s.options);
  return from_pools(*mx, cy.get(), s.points, rng, s.name);
}

SetPair draw_aniso(const RegimeSpec& s, Rng& rng) {
  const arma::vec lam = parse_spectrum(s.options.spectrum, s.dim);
  Rng fixed(s.seed, Stream::Data, 0xA0150ULL << 20);  // Lambda is shared by all set pairs
  const arma::mat root = haar_orthogonal(s.dim, fixed) * arma::diagmat(arma::sqrt(lam));
  return {root * rng.normal_matrix(s.dim, s.points), root * rng.normal_matrix(s.dim, s.points)};
}

SetPair draw_clustered(const RegimeSpec& s, Rng& rng) {
  const RegimeOptions& opt = s.options;
  const arma::uword d = s.dim, L = s.points;
  require(opt.clusters > 0, "clusters must be > 0, got 0");
  require(std::isfinite(opt.cluster_radius) && opt.cluster_radius >= 0, "cluster radius must be >= 0, got {}",
          opt.cluster_radius);
  Rng fixed(s.seed, Stream::Data, 0xC1057ULL << 20);
  arma::mat centres = fixed.normal_matrix(d, 2 * opt.clusters);
  centres.each_row() /= arma::sqrt(arma::sum(arma::square(centres), 0));
  centres *= opt.cluster_radius;
  SetPair p{s.sigma * rng.normal_matrix(d, L), s.sigma * rng.normal_matrix(d, L)};
  for (arma::uword i = 0; i < L; ++i) {
    p.X.col(i) += centres.col(i % opt.clusters);
    p.Y.col(i) += centres.col(opt.clusters + i % opt.clusters);
  }
  return p;  // sigma is the within-cluster spread here, not a global scale
}

SetPair draw_file(const RegimeSpec& s, Rng& rng) {
  const RegimeOptions& opt = s.options;
  const arma::uword L = s.points;
  const FileShape shape = file_regime_shape(opt);
  require(shape.dim == s.dim, "--dim {} does not match the points in {} (d = {})", s.dim, opt.x_file, shape.dim);
  const auto px = load_points(opt.x_file);
  if (opt.y_file.empty()) {
    require(L <= shape.max_points, "--points {} is too many: {} has {} points, 2 L disjoint ones are needed", L,
            opt.x_file, px->points.n_cols);
    return from_pools(px->points, nullptr, L, rng, opt.x_file);
  }
  const auto py = load_points(opt.y_file);
  require(L <= shape.max_points, "--points {} is too many: {} has {} points and {} has {}", L, opt.x_file,
          px->points.n_cols, opt.y_file, py->points.n_cols);
  return from_pools(px->points, &py->points, L, rng, opt.x_file + " / " + opt.y_file);
}

}  // namespace

const std::vector<Regime>& regimes() {
  static const std::vector<Regime> all = {
      {"normal", "x, y ~ N(0, sigma^2 I) (CRT 5.1)", false, {}, draw_normal},
      {"sphere", "x, y uniform on the sphere of radius sigma (CRT 5.1)", false, {}, draw_sphere},
      {"heterogen", "x ~ N(0, sigma^2 I), y ~ N(sigma 1, sigma^2 I) (CRT 5.1)", false, {}, draw_heterogen},
      {"mnist", "random MNIST training images (CRT 5.1, DERF 5.1)", true, {}, draw_images},
      {"fashion-mnist", "random Fashion-MNIST training images", true, {}, draw_images},
      {"cifar10", "random CIFAR-10 training images, grayscale (DERF 5.1)", true, {}, draw_images},
      {"mnist/cifar10", "x from MNIST, y from CIFAR-10 (DERF 5.1)", true, {}, draw_mnist_cifar10},
      {"aniso",
       "x, y ~ N(0, sigma^2 Lambda), Lambda = Q diag(spectrum) Q^T, Q Haar (DARK Thm 3.2)",
       false,
       {"spectrum"},
       draw_aniso},
      {"clustered",
       "x, y from clusters at distance cluster-radius from 0, spread sigma (HRF H.1)",
       false,
       {"clusters", "cluster-radius"},
       draw_clustered,
       true},
      {"file", "points are rows of a file, times sigma", false, {"x-file", "y-file"}, draw_file},
  };
  return all;
}

SetPair draw_regime(const RegimeSpec& spec) {
  const Regime& regime = find_regime(spec.name);
  require(spec.dim > 0, "dimension d must be > 0, got 0");
  require(spec.points > 0, "number of points L must be > 0, got 0");
  require(std::isfinite(spec.sigma) && spec.sigma > 0, "sigma must be > 0, got {}", spec.sigma);
  Rng rng(spec.seed, Stream::Data, spec.pair_index);
  SetPair p = regime.draw(spec, rng);
  if (regime.own_sigma) {
    require_representable(p, spec.sigma);
    return p;
  }
  const RegimeOptions& opt = spec.options;
  const bool file = spec.name == "file";
  const double norm2 = file ? largest_norm2(p) : 0;
  p.X *= spec.sigma;
  p.Y *= spec.sigma;
  require_representable(p, spec.sigma, file ? opt.x_file + (opt.y_file.empty() ? "" : " / " + opt.y_file) : "", norm2);
  return p;
}

}  // namespace kestrel
