// Samplers for Gaussian projections omega (columns of a d x M matrix): iid, block-orthogonal (CRT
// appendix 9.1) with Haar blocks and chi(d) norms, simplex blocks (Reid et al. 2023, "Simplex random
// features"), structured Hadamard blocks (SORF, Yu et al. 2016; HRF's "ORF-Had") and randomised Halton
// points (HRF's "Halton-R"). What each guarantees about the
// marginal law of a column, and so about unbiasedness, is stated per sampler below.
#pragma once
#include <string>

#include <armadillo>

#include "core/enum_names.hpp"
#include "core/rng.hpp"

namespace kestrel {

// iid: columns iid N(0, I_d).
//
// orthogonal: independent blocks of d columns Q diag(r), Q Haar on O(d) (QR of a Gaussian matrix with
//   the signs of R's diagonal moved into Q: a plain QR is not Haar, see GUIDE "Traps"), r_m ~ chi(d)
//   independent. Each column is exactly N(0, I_d); columns of a block are orthogonal. Every estimator
//   stays unbiased for every M; CRT Thm 4.1 bounds the variance of positive estimators (PosRF, OPRF)
//   by the iid variance.
//
// simplex: independent blocks of d columns r_k Q s_k, Q Haar on O(d) (as above), s_1..s_d the unit vertices
//   of a regular simplex centred at 0 (the columns of I - 11^T/d normalised), r_k ~ chi(d) independent;
//   Q s_k = (q_k - mean of Q's columns) sqrt(d/(d-1)), O(d^2) per block after the QR. Each column is exactly
//   N(0, I_d) (Q s_k is uniform on the sphere, independent of r_k), so every estimator stays unbiased for
//   every M; within a block the directions have pairwise cosine exactly -1/(d-1), the most negative common
//   cosine d unit vectors can have (they sum to zero). The last block of an M that is not a multiple of d
//   keeps its first columns (pairwise cosine -1/(d-1) still). d = 1: the one vertex is +-1 uniformly, so
//   columns are iid. The exact variance of GERF-family estimators with these blocks, and with orthogonal
//   ones, is in analysis/coupled_variance.hpp (for positive features: simplex <= orthogonal <= iid).
//
// structured (SORF): blocks of p columns, p = the next power of two >= d. With H the normalised
//   p x p Walsh-Hadamard matrix and D0..D3 independent uniform random sign diagonals, a block's
//   directions are the columns of  S = D0 H D1 H D2 H D3  restricted to d rows chosen uniformly at
//   random without replacement (in random order), each normalised to unit length u_m, and the
//   columns are omega_m = r_m u_m with r_m ~ chi(d) independent (a block with a zero truncated column,
//   possible only for p > d, is redrawn). Cost O(p log p) per column (fast Walsh-Hadamard transform).
//   What holds EXACTLY, for every d:
//     (a) |omega_m| ~ chi(d), independent of the direction u_m;
//     (b) the law of omega_m is invariant under every coordinate sign change (D0) and every
//         coordinate permutation (random row choice), hence E omega = 0, every moment with an odd
//         exponent in some coordinate vanishes, and E[omega omega^T] = I_d (the coordinates of u are
//         exchangeable with |u| = 1, so E u_i^2 = 1/d);
//     (c) if d is a power of two (p = d) the columns of a block are orthogonal.
//   What does NOT hold: u_m takes finitely many values and is not uniform on the sphere, so omega_m
//   is not N(0, I_d). Its fourth and higher even moments differ from the Gaussian ones: for d = 2,
//   u = (+-1, +-1)/sqrt(2) always and E omega_1^4 = E r^4 / 4 = 2 instead of 3.
//   Consequence: an estimator E[f(omega, x, y)] that is exact for Gaussian omega has, with SORF
//   omegas, a per-feature bias that does not shrink with M. Writing the feature's mean as
//   E_r E_u[g(r u^T z, r)] (z = x + y for PosRF/OPRF, x - y for TrigRF) and expanding g in powers of
//   u^T z, the terms of order 0, 1, 2 and all odd orders agree with the Gaussian ones by (a)-(b), so
//   the bias is of order |z|^4 for small |z| and depends on the direction of z. Example: PosRF at
//   d = 2 with x + y on an axis has mean exp(-(|x|^2+|y|^2)/2) E_r cosh(r |z| / sqrt 2) instead of
//   exp(x^T y) (3.4% low at |z| = 1, 11% at |z| = 1.4; tested). In higher d the bias is small
//   (PosRF, d = M = 64, axis-aligned |z| = 1.4: within 2 se of 0 at R = 20000) and the variance is
//   close to the orthogonal sampler's. Use it as HRF uses ORF-Had: a fast, nearly unbiased
//   baseline, not for exact-variance comparisons.
//
// halton (randomised QMC): column m (m = 0..M-1) is Phi^-1(frac(h_{m+1} + v)), with h_k the k-th
//   point of GSL's Halton sequence in [0,1)^d (d <= 1229) and one uniform shift v ~ U[0,1)^d per call
//   (Cranley-Patterson rotation, 53-bit resolution). frac(h + v) is exactly U[0,1)^d for any fixed h,
//   so every column is exactly N(0, I_d) (up to the resolution of the uniforms; the probability-
//   2^-53 value 0 is replaced by 2^-53 so Phi^-1 stays finite) and every estimator is unbiased for
//   every M. The columns of one call are dependent (all share v), which is the point: the
//   low-discrepancy pattern is kept. Separate calls are independent. The sequence is not scrambled:
//   with M small against the large prime bases of high coordinates, the first M points of those
//   coordinates are nearly collinear, and the variance can be far above iid (measured, PosRF/OPRF at
//   d = M = 64: about 10x; below iid at d <= 4, about equal at d = 8). HRF Table 1 also finds Halton-R the worst.
enum class Sampler { Iid, Orthogonal, Structured, Halton, Simplex };
template <>
struct EnumNames<Sampler> {
  static constexpr std::string_view what = "sampler";
  static constexpr std::array<EnumName<Sampler>, 5> names{{{Sampler::Iid, "iid"},
                                                           {Sampler::Orthogonal, "orthogonal"},
                                                           {Sampler::Simplex, "simplex"},
                                                           {Sampler::Structured, "structured"},
                                                           {Sampler::Halton, "halton"}}};
};
inline Sampler parse_sampler(const std::string& name) { return parse_enum<Sampler>(name); }
inline std::string to_string(Sampler s) { return name_of(s); }

// Largest dimension of GSL's Halton generator.
inline constexpr arma::uword kHaltonMaxDim = 1229;

// d x M matrix of projections drawn only from rng. InvalidArgument for d = 0, M = 0, or d > 1229
// with the halton sampler.
arma::mat draw_gaussian_omegas(arma::uword d, arma::uword M, Sampler sampler, Rng& rng);

// A Haar-distributed d x d orthogonal matrix.
arma::mat haar_orthogonal(arma::uword d, Rng& rng);

// The structured and Halton samplers alone (same contracts as draw_gaussian_omegas).
arma::mat draw_structured_omegas(arma::uword d, arma::uword M, Rng& rng);
arma::mat draw_halton_omegas(arma::uword d, arma::uword M, Rng& rng);

// In-place unnormalised fast Walsh-Hadamard transform of v[0..n-1] (n a power of two): v <- H_n v
// with H_n = [[H, H], [H, -H]], H_n^2 = n I. O(n log n).
void fwht(double* v, arma::uword n);

}  // namespace kestrel
