// Sampling regimes for pairs of point sets X, Y (d x L each):
//   normal:     x, y ~ N(0, sigma^2 I)                       (CRT 5.1)
//   sphere:     x, y uniform on sigma S^{d-1}                (CRT 5.1)
//   heterogen:  x ~ N(0, sigma^2 I), y ~ N(sigma 1, sigma^2 I) (CRT 5.1)
//   mnist, fashion-mnist, cifar10: random training images (images.hpp: grayscale, [0,1], downscale to
//               sqrt(d) x sqrt(d) by area, bilinear or antialiased bilinear), times the pixel scale (1 or
//               255), preprocessed, times sigma (CRT 5.1, DERF 5.1)
//   mnist/cifar10: x from MNIST, y from CIFAR-10 (DERF 5.1)
//   aniso:      x, y ~ N(0, sigma^2 Lambda), Lambda = Q diag(spectrum) Q^T, Q Haar (DARK Thm 3.2)
//   clustered:  x from k Gaussian clusters, y from k other clusters, centres at distance
//               `cluster_radius` from 0, within-cluster standard deviation sigma (HRF appendix H.1)
//   file:       points are rows of a file (text, .npy or FILE.h5:/dataset; data/points_file.hpp), times sigma
// X and Y never share a point: image and file regimes draw 2L distinct rows (or X, Y from two files).
// A set pair comes from stream (seed, Data, pair); the regime's fixed structure (Lambda, centres)
// from the seed alone, so every pair shares it. The synthetic regimes draw unit-scale sets and
// multiply by sigma, so a sweep over sigma uses common random numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "core/rng.hpp"
#include "data/images.hpp"

namespace kestrel {

struct RegimeOptions;
enum class Preprocess { Raw, Center, Standardize, StandardizeGlobal, MnistNorm };
template <>
struct EnumNames<Preprocess> {
  static constexpr std::string_view what = "preprocessing";
  static constexpr std::array<EnumName<Preprocess>, 5> names{{{Preprocess::Raw, "raw"},
                                                              {Preprocess::Center, "center"},
                                                              {Preprocess::Standardize, "standardize"},
                                                              {Preprocess::StandardizeGlobal, "standardize-global"},
                                                              {Preprocess::MnistNorm, "mnist-norm"}}};
};
inline Preprocess parse_preprocess(const std::string& name) { return parse_enum<Preprocess>(name); }
inline std::string to_string(Preprocess p) { return name_of(p); }
// The pixel scale must be 1 or 255 (throws naming the value).
double validate_pixel_scale(double scale);
// The image pipeline as one name, e.g. "raw/area/1", "standardize-global/bilinear-aa" (no scale when
// the preprocessing does not depend on it).
std::string pipeline_name(const RegimeOptions& o);

struct RegimeOptions {
  std::string data_dir;  // empty: default_data_dir()
  // Image pixels: raw ([0,1]), center (minus the pool's mean image), standardize (per pixel zero
  // mean, unit variance over the pool; constant pixels become 0), standardize-global (one mean and one
  // standard deviation over all pixels of the pool) or mnist-norm (torchvision's Normalize((0.1307,),
  // (0.3081,)) on [0,1] pixels for MNIST; for other sets the same construction: the mean and standard
  // deviation of all full-resolution [0,1] training pixels, e.g. CIFAR-10 grayscale). The pool is the
  // downscaled training set. With raw pixels every x^T y >= 0.
  Preprocess preprocess = Preprocess::Raw;
  Resize resize = Resize::Area;  // images.hpp
  // Pixels in [0, pixel_scale] (1 or 255) before raw / center; the standardising forms do not depend on it.
  double pixel_scale = 1;
  std::string spectrum = "geometric:100";  // aniso: geometric:<condition number>, rank:<r>, list:<l1,..,ld>
  arma::uword clusters = 2;                // clustered: clusters per side
  double cluster_radius = 1.0;             // clustered: norm of every centre
  std::string x_file, y_file;              // file regime
};

// What identifies the points beyond the options (provenance's "inputs"): the data directory read (with `images`: the
// regime draws images), and the sha256 of the contents of --x-file and --y-file, so that a sweep's parts never mix two
// versions of a file.
nlohmann::json regime_inputs(const RegimeOptions& o, bool images);

struct SetPair {
  arma::mat X, Y;
};

class Rng;
struct RegimeSpec;

// The regimes, declared once: name, a line of help, whether it draws from an image set's pool (then it reads the
// image options: data-dir, preprocess, resize, pixel-scale), the other regime options it reads (as the command line
// spells them), and its draw. A draw returns the pair at unit scale, multiplied by sigma after (a sweep over sigma then
// uses common random numbers), unless `own_sigma` (the regime uses sigma itself).
struct Regime {
  std::string name, help;
  bool images = false;
  std::vector<std::string> options;
  SetPair (*draw)(const RegimeSpec& spec, Rng& rng) = nullptr;
  bool own_sigma = false;
};
const std::vector<Regime>& regimes();
const Regime& find_regime(const std::string& name);  // InvalidArgument naming the known ones
const std::vector<std::string>& regime_names();
void validate_regime(const std::string& name);

// One set pair to draw, filled with designated initializers:
//   draw_regime({.name = "mnist", .dim = 64, .points = 256, .sigma = 0.5, .seed = 1, .options = o})
// The pair comes from stream (seed, Data, pair_index); pairs of one study differ in pair_index only.
struct RegimeSpec {
  std::string name;                   // one of regime_names()
  arma::uword dim = 0;                // d
  arma::uword points = 0;             // L, points per set
  double sigma = 1;                   // scale (clustered: the within-cluster spread)
  std::uint64_t seed = kDefaultSeed;  // seed of the draws
  std::uint64_t pair_index = 0;       // which set pair of the seed
  RegimeOptions options = {};         // image pipeline, aniso spectrum, clusters, files
};

// The largest |x|^2 of a drawn set pair (after sigma): logs of kernels and variances are multiples of it and must stay
// finite doubles with room for their squares (fits such as GERF's square |x|^2; spreads square the logs) and for sums
// over L^2 pairs. draw_regime refuses larger points, naming sigma or the file. (1e250 let GERF's fit overflow.)
inline constexpr double kMaxScaledNorm2 = 1e150;

SetPair draw_regime(const RegimeSpec& spec);

// The eigenvalues of Lambda for the aniso regime (mean 1 unless given as a list).
arma::vec parse_spectrum(const std::string& spec, arma::uword d);

// Points from a file (data/points_file.hpp: text, .npy or FILE.h5:/dataset): one point per row, d x n.
arma::mat load_points_file(const std::string& path);

// The file regime's dimension and the largest L it can draw (n/2 disjoint points from one file, min(nx, ny)
// from two); throws naming the file when it cannot be read or the files disagree.
struct FileShape {
  arma::uword dim = 0, max_points = 0;
};
FileShape file_regime_shape(const RegimeOptions& o);

}  // namespace kestrel
