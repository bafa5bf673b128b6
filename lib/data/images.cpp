// Image loading, grayscale conversion and the area / bilinear / antialiased bilinear downscales (see
// images.hpp).
#include "data/images.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "data/idx.hpp"

namespace kestrel {

ImageSet load_mnist(const std::string& dir, const std::string& split) {
  require(split == "train" || split == "test", "split must be 'train' or 'test', got '{}'", split);
  const std::string stem = split == "train" ? "train" : "t10k";
  const std::string ip = dir + "/" + stem + "-images-idx3-ubyte", lp = dir + "/" + stem + "-labels-idx1-ubyte";
  const IdxArray im = parse_idx(read_bytes(ip), ip);
  const IdxArray lb = parse_idx(read_bytes(lp), lp);
  if (im.dims.size() != 3)
    throw IoError(fmt::format("{}: expected 3 dimensions (n, rows, cols), got {}", ip, im.dims.size()));
  if (lb.dims.size() != 1) throw IoError(fmt::format("{}: expected 1 dimension, got {}", lp, lb.dims.size()));
  if (lb.dims[0] != im.dims[0])
    throw IoError(fmt::format("{}: {} labels for {} images in {}", lp, lb.dims[0], im.dims[0], ip));
  ImageSet s;
  s.name = dir;
  s.rows = im.dims[1];
  s.cols = im.dims[2];
  s.labels = lb.data;
  const std::size_t px = s.rows * s.cols;
  s.images.reserve(im.dims[0]);
  for (std::size_t n = 0; n < im.dims[0]; ++n) {
    arma::mat m(s.rows, s.cols);
    for (arma::uword r = 0; r < s.rows; ++r)
      for (arma::uword c = 0; c < s.cols; ++c) m(r, c) = im.data[n * px + r * s.cols + c] / 255.0;
    s.images.push_back(std::move(m));
  }
  return s;
}

ImageSet load_cifar10(const std::string& dir, const std::string& split) {
  require(split == "train" || split == "test", "split must be 'train' or 'test', got '{}'", split);
  std::vector<std::string> files;
  if (split == "test")
    files = {"test_batch.bin"};
  else
    for (int k = 1; k <= 5; ++k) files.push_back(fmt::format("data_batch_{}.bin", k));
  ImageSet s;
  s.name = dir;
  s.rows = s.cols = 32;
  for (const auto& f : files) {
    const std::string path = dir + "/" + f;
    const CifarBatch b = parse_cifar(read_bytes(path), path);
    for (std::size_t n = 0; n < b.labels.size(); ++n) {
      const std::uint8_t* p = b.pixels.data() + n * 3072;
      arma::mat m(32, 32);
      for (arma::uword r = 0; r < 32; ++r)
        for (arma::uword c = 0; c < 32; ++c) {
          const std::size_t j = r * 32 + c;
          m(r, c) = (0.299 * p[j] + 0.587 * p[1024 + j] + 0.114 * p[2048 + j]) / 255.0;
        }
      s.images.push_back(std::move(m));
      s.labels.push_back(b.labels[n]);
    }
  }
  return s;
}

namespace {
// Weights w(o, i): the length of input cell i inside output cell o, in input-pixel units, divided by
// the output cell's length, so each row sums to 1.
arma::mat area_weights(arma::uword in, arma::uword out) {
  arma::mat W(out, in, arma::fill::zeros);
  const double scale = static_cast<double>(in) / out;
  for (arma::uword o = 0; o < out; ++o) {
    const double a = o * scale, b = (o + 1) * scale;
    for (arma::uword i = static_cast<arma::uword>(std::floor(a)); i < in && i < b; ++i)
      W(o, i) = (std::min<double>(b, i + 1) - std::max<double>(a, i)) / scale;
  }
  return W;
}

// Half-pixel-centre linear interpolation: the sample point (o + 1/2) scale - 1/2 is clamped to [0, in - 1]
// (TF and torch clamp the same way) and split between its two neighbours.
arma::mat bilinear_weights(arma::uword in, arma::uword out) {
  arma::mat W(out, in, arma::fill::zeros);
  const double scale = static_cast<double>(in) / out;
  for (arma::uword o = 0; o < out; ++o) {
    const double src = std::clamp((o + 0.5) * scale - 0.5, 0.0, static_cast<double>(in - 1));
    const auto i0 = static_cast<arma::uword>(std::floor(src));
    const arma::uword i1 = std::min(i0 + 1, in - 1);
    const double f = src - i0;
    W(o, i0) += 1 - f;
    W(o, i1) += f;
  }
  return W;
}

// The triangle (tent) filter stretched by the scale factor, evaluated at input pixel centres and
// normalised per output pixel; pixels outside the image get no weight (PIL and TF renormalise over the
// pixels inside).
arma::mat bilinear_aa_weights(arma::uword in, arma::uword out) {
  arma::mat W(out, in, arma::fill::zeros);
  const double scale = std::max(1.0, static_cast<double>(in) / out);
  const double step = static_cast<double>(in) / out;
  for (arma::uword o = 0; o < out; ++o) {
    const double c = (o + 0.5) * step;
    for (arma::uword i = 0; i < in; ++i) W(o, i) = std::max(0.0, 1 - std::abs(i + 0.5 - c) / scale);
    W.row(o) /= arma::accu(W.row(o));
  }
  return W;
}
}  // namespace

arma::mat resize_weights(arma::uword in, arma::uword out, Resize method) {
  require(out > 0 && out <= in, "resize from {} to {} pixels: the output must have 1..{} pixels", in, out, in);
  switch (method) {
    case Resize::Area:
      return area_weights(in, out);
    case Resize::Bilinear:
      return bilinear_weights(in, out);
    case Resize::BilinearAA:
      return bilinear_aa_weights(in, out);
  }
  throw InvalidArgument("unknown resize method");
}

arma::mat downscale(const arma::mat& img, arma::uword out_rows, arma::uword out_cols, Resize method) {
  require(out_rows > 0 && out_cols > 0, "output size must be positive, got {} x {}", out_rows, out_cols);
  require(out_rows <= img.n_rows && out_cols <= img.n_cols, "cannot downscale {} x {} to {} x {}", img.n_rows,
          img.n_cols, out_rows, out_cols);
  return resize_weights(img.n_rows, out_rows, method) * img * resize_weights(img.n_cols, out_cols, method).t();
}

arma::mat image_points(const ImageSet& set, arma::uword d, Resize method) {
  const auto s = static_cast<arma::uword>(std::llround(std::sqrt(static_cast<double>(d))));
  require(s * s == d, "image regimes need d = s^2 (an s x s downscale), got d = {}", d);
  require(s <= set.rows && s <= set.cols, "d = {} needs {} x {} pixels, images are {} x {}", d, s, s, set.rows,
          set.cols);
  const arma::mat Wr = resize_weights(set.rows, s, method), Wc = resize_weights(set.cols, s, method);
  arma::mat P(d, set.images.size());
  for (std::size_t n = 0; n < set.images.size(); ++n) {
    const arma::mat small = Wr * set.images[n] * Wc.t();
    P.col(n) = arma::vectorise(small.t());  // row-major flattening
  }
  return P;
}

std::pair<double, double> pixel_mean_std(const ImageSet& set) {
  require(!set.images.empty(), "{}: no images", set.name);
  double n = 0, sum = 0, sum2 = 0;
  for (const auto& m : set.images) {
    n += m.n_elem;
    sum += arma::accu(m);
  }
  const double mean = sum / n;
  for (const auto& m : set.images) sum2 += arma::accu(arma::square(m - mean));
  return {mean, std::sqrt(sum2 / n)};
}

}  // namespace kestrel
