// Image data sets as point sets (CRT 5.1, DERF 5.1): MNIST, Fashion-MNIST and CIFAR-10 images are
// converted to grayscale (CIFAR: ITU-R BT.601 luma 0.299 R + 0.587 G + 0.114 B, the conversion of
// PIL's convert("L") without its rounding), scaled to [0, 1], downscaled to s x s by area averaging
// (each output pixel is the exact area-weighted mean of the input pixels it covers: a box filter,
// which is the antialiasing filter for downscaling; 28 -> 8 covers 3.5 x 3.5 input pixels) and
// flattened row by row to d = s^2 (s = 8 gives the papers' d = 64).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <armadillo>

namespace kestrel {

struct ImageSet {
  std::string name;
  arma::uword rows = 0, cols = 0;
  std::vector<arma::mat> images;  // grayscale in [0, 1], rows x cols each
  std::vector<std::uint8_t> labels;
};

// split: "train" or "test". dir holds the original files (IDX names / cifar-10-batches-bin names).
ImageSet load_mnist(const std::string& dir, const std::string& split);  // also Fashion-MNIST
ImageSet load_cifar10(const std::string& dir, const std::string& split);

// Area-averaging downscale of a rows x cols image to out_rows x out_cols.
arma::mat downscale_area(const arma::mat& img, arma::uword out_rows, arma::uword out_cols);

// d x n points: every image downscaled to s x s (s^2 = d) and flattened row-major.
arma::mat image_points(const ImageSet& set, arma::uword d);

}  // namespace kestrel
