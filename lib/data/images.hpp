// Image data sets as point sets (CRT 5.1, DERF 5.1): MNIST, Fashion-MNIST and CIFAR-10 images are
// converted to grayscale (CIFAR: ITU-R BT.601 luma 0.299 R + 0.587 G + 0.114 B, the conversion of
// PIL's convert("L") without its rounding), scaled to [0, 1], downscaled to s x s and flattened row by
// row to d = s^2 (s = 8 gives the papers' d = 64). The papers only say "resized to 8 x 8"; three
// resize kernels are offered (Resize), each a separable linear map whose rows sum to 1:
//   area:        each output pixel is the exact area-weighted mean of the input pixels it covers (a box
//                filter; 28 -> 8 covers 3.5 x 3.5 input pixels). kestrel's default.
//   bilinear:    half-pixel-centre bilinear sampling without antialiasing, as tf.image.resize(method=
//                "bilinear", antialias=False) and torch interpolate(mode="bilinear", align_corners=False):
//                output o samples input coordinate (o + 1/2) scale - 1/2 (clamped to the image) from its
//                two nearest pixels, so most input pixels get no weight when downscaling.
//   bilinear-aa: the triangle filter widened by the scale factor, as tf.image.resize(antialias=True) and
//                PIL's Image.resize(BILINEAR): input pixel i gets max(0, 1 - |i + 1/2 - c| / scale) with
//                c = (o + 1/2) scale the output pixel's centre, normalised to sum 1.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <armadillo>

#include "core/enum_names.hpp"

namespace kestrel {

enum class Resize { Area, Bilinear, BilinearAA };
template <>
struct EnumNames<Resize> {
  static constexpr std::string_view what = "resize";
  static constexpr std::array<EnumName<Resize>, 3> names{
      {{Resize::Area, "area"}, {Resize::Bilinear, "bilinear"}, {Resize::BilinearAA, "bilinear-aa"}}};
};
inline Resize parse_resize(const std::string& name) { return parse_enum<Resize>(name); }
inline std::string to_string(Resize r) { return name_of(r); }

struct ImageSet {
  std::string name;
  arma::uword rows = 0, cols = 0;
  std::vector<arma::mat> images;  // grayscale in [0, 1], rows x cols each
  std::vector<std::uint8_t> labels;
};

// split: "train" or "test". dir holds the original files (IDX names / cifar-10-batches-bin names).
ImageSet load_mnist(const std::string& dir, const std::string& split);  // also Fashion-MNIST
ImageSet load_cifar10(const std::string& dir, const std::string& split);

// The out x in matrix of a one-dimensional resize from in to out pixels (out <= in); every row sums to 1.
arma::mat resize_weights(arma::uword in, arma::uword out, Resize method);

// Downscale of a rows x cols image to out_rows x out_cols (the separable map Wr * img * Wc^T).
arma::mat downscale(const arma::mat& img, arma::uword out_rows, arma::uword out_cols, Resize method);
inline arma::mat downscale_area(const arma::mat& img, arma::uword out_rows, arma::uword out_cols) {
  return downscale(img, out_rows, out_cols, Resize::Area);
}

// d x n points: every image downscaled to s x s (s^2 = d) and flattened row-major.
arma::mat image_points(const ImageSet& set, arma::uword d, Resize method = Resize::Area);

// Mean and (population) standard deviation of all pixels of all images at full resolution: the
// dataset constants of a Normalize transform (MNIST: 0.1307, 0.3081).
std::pair<double, double> pixel_mean_std(const ImageSet& set);

}  // namespace kestrel
