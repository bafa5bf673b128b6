// HRF appendix H.3's clustered data with the sign search that reaches Table 3's s values (clustered_h3.hpp).
#include "data/clustered_h3.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

namespace {

// Which of the pairs (1,1), (1,2), (2,1), (2,2) agree in sign for each pattern, starting from x > 0 > y:
// flipping x_i makes row i agree, flipping y_j column j; the agreement matrix is rank one in signs, so a
// coordinate adds to 0, 2 or 4 pairs.
constexpr int kPatterns = 8;
constexpr std::array<std::array<bool, 4>, kPatterns> kAgree = {{
    {false, false, false, false},  // nothing flipped
    {true, true, false, false},    // x1
    {false, false, true, true},    // x2
    {true, false, true, false},    // y1
    {false, true, false, true},    // y2
    {true, false, false, true},    // x2 and y1
    {false, true, true, false},    // x1 and y1
    {true, true, true, true},      // y1 and y2
}};
// The reflections (x1, x2, y1, y2) that realise each pattern.
constexpr std::array<std::array<bool, 4>, kPatterns> kFlip = {{
    {false, false, false, false},
    {true, false, false, false},
    {false, true, false, false},
    {false, false, true, false},
    {false, false, false, true},
    {false, true, true, false},
    {true, false, true, false},
    {false, false, true, true},
}};

struct Search {
  std::vector<int> pattern;
  std::array<double, 4> target{}, s{};
  double error = 0;
};

double relative_error(const std::array<double, 4>& s, const std::array<double, 4>& t) {
  double e = 0;
  for (int p = 0; p < 4; ++p) e += std::pow((s[p] - t[p]) / t[p], 2);
  return e;
}

// Local search over the patterns: the best change of one coordinate's pattern, then of two coordinates' at
// once (which escapes the minima of single changes), until neither improves. c(k, p) = 4 |a_ik b_jk| is
// coordinate k's share of pair p.
Search descend(const arma::mat& c, const std::array<double, 4>& target) {
  Search r;
  r.pattern.assign(c.n_rows, 0);
  r.target = target;
  r.s = {0, 0, 0, 0};
  r.error = relative_error(r.s, target);
  auto moved = [&](std::array<double, 4> s, arma::uword k, int q) {
    for (int p = 0; p < 4; ++p) s[p] += c(k, p) * (double(kAgree[q][p]) - double(kAgree[r.pattern[k]][p]));
    return s;
  };
  for (int round = 0; round < 100; ++round) {
    bool changed = false;
    for (arma::uword k = 0; k < c.n_rows; ++k)
      for (int q = 0; q < kPatterns; ++q) {
        const auto s = moved(r.s, k, q);
        if (const double e = relative_error(s, target); e < r.error - 1e-15) {
          r.s = s, r.pattern[k] = q, r.error = e;
          changed = true;
        }
      }
    if (changed) continue;
    for (arma::uword k = 0; k < c.n_rows && !changed; ++k)
      for (arma::uword l = k + 1; l < c.n_rows && !changed; ++l)
        for (int q = 0; q < kPatterns && !changed; ++q) {
          const auto sk = moved(r.s, k, q);
          for (int u = 0; u < kPatterns; ++u) {
            std::array<double, 4> s = sk;
            for (int p = 0; p < 4; ++p) s[p] += c(l, p) * (double(kAgree[u][p]) - double(kAgree[r.pattern[l]][p]));
            if (const double e = relative_error(s, target); e < r.error - 1e-15) {
              r.s = s, r.pattern[k] = q, r.pattern[l] = u, r.error = e;
              changed = true;
              break;
            }
          }
        }
    if (!changed) break;
  }
  return r;
}

arma::mat cluster_points(const arma::vec& mean, double sigma, arma::uword n, Rng& rng) {
  arma::mat P = sigma * rng.normal_matrix(mean.n_elem, n);
  P.each_col() += mean;
  return P;
}

}  // namespace

double h3_real_diagonal_loss(const arma::vec& a, const arma::vec& b) {
  require(a.n_elem == b.n_elem, "centres of dimensions {} and {}", a.n_elem, b.n_elem);
  double s = 0;
  for (arma::uword k = 0; k < a.n_elem; ++k)
    if (a(k) * b(k) > 0) s += 4 * a(k) * b(k);
  return s;
}

H3Data h3_clustered(const H3Options& opt, std::uint64_t seed) {
  require(opt.dim > 0 && opt.per_cluster > 0, "H.3 data needs dim > 0 and points per cluster > 0, got {} and {}",
          opt.dim, opt.per_cluster);
  require(std::isfinite(opt.sigma) && opt.sigma > 0, "sigma must be > 0, got {}", opt.sigma);
  require(std::isfinite(opt.base_scale) && opt.base_scale > 0, "base scale must be > 0, got {}", opt.base_scale);
  require(std::isfinite(opt.norm) && opt.norm > 0, "norm must be > 0, got {}", opt.norm);
  for (double t : opt.s) require(std::isfinite(t) && t > 0, "target s must be > 0, got {}", t);
  const arma::uword d = opt.dim, n = opt.per_cluster;
  Rng rng(seed, Stream::Data, 0xB3ULL << 24);
  const arma::vec X0 = opt.base_scale * rng.normal_matrix(d, 1), Y0 = opt.base_scale * rng.normal_matrix(d, 1);
  const arma::mat O11 = haar_orthogonal(d, rng), O21 = haar_orthogonal(d, rng), O12 = haar_orthogonal(d, rng),
                  O22 = haar_orthogonal(d, rng);
  // Clusters x1, x2, y1, y2, each scaled point by point to the norm.
  std::array<arma::mat, 4> C = {
      cluster_points(O11 * X0, opt.sigma, n, rng), cluster_points(O21 * X0, opt.sigma, n, rng),
      cluster_points(O12 * Y0, opt.sigma, n, rng), cluster_points(O22 * Y0, opt.sigma, n, rng)};
  for (auto& P : C) P.each_row() %= opt.norm / arma::sqrt(arma::sum(arma::square(P), 0));
  // Baseline reflections: x means positive, y means negative in every coordinate.
  std::array<arma::vec, 4> m;
  for (int c = 0; c < 4; ++c) {
    m[c] = arma::mean(C[c], 1);
    for (arma::uword k = 0; k < d; ++k)
      if ((c < 2) != (m[c](k) >= 0)) {
        C[c].row(k) *= -1;
        m[c](k) = -m[c](k);
      }
  }
  arma::mat share(d, 4);  // 4 |x_i,k y_j,k| for pairs (1,1), (1,2), (2,1), (2,2)
  for (int p = 0; p < 4; ++p) share.col(p) = 4 * arma::abs(m[p / 2] % m[2 + p % 2]);
  std::array<double, 4> t = opt.s;
  std::sort(t.begin(), t.end());
  Search best;
  best.error = INFINITY;
  do {
    Search r = descend(share, t);
    if (r.error < best.error) best = r;
  } while (std::next_permutation(t.begin(), t.end()));
  H3Data out;
  for (arma::uword k = 0; k < d; ++k) {
    out.adjusted_coordinates += best.pattern[k] != 0;
    for (int c = 0; c < 4; ++c)
      if (kFlip[best.pattern[k]][c]) {
        C[c].row(k) *= -1;
        m[c](k) = -m[c](k);
      }
  }
  out.X = arma::join_rows(C[0], C[1]);
  out.Y = arma::join_rows(C[2], C[3]);
  out.s_target.set_size(2, 2);
  out.s_means.set_size(2, 2);
  for (int p = 0; p < 4; ++p) {
    out.s_target(p / 2, p % 2) = best.target[p];
    out.s_means(p / 2, p % 2) = h3_real_diagonal_loss(m[p / 2], m[2 + p % 2]);
  }
  return out;
}

}  // namespace kestrel
