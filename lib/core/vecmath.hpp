// Vectorised exp, log, expm1, log1p, sin, cos (and exp_libm, std::exp's bits) over arrays, in place, and the log-domain
// variance transforms built from them. On x86-64 they call glibc's libmvec (the AVX-512 or AVX2 variants, at most 4
// ulp, IEEE special values), chosen once from the CPU; elsewhere <cmath>. A tail shorter than the vector width is
// padded and goes through the same vector routine, so an entry's result depends only on its value, never on its
// position or the thread count.
#pragma once
#include <cstddef>
#include <string>

#include <armadillo>

// The hot elementwise loops are compiled for AVX-512, AVX2 and baseline x86-64, picked at load time (GCC function
// multiversioning): the Debian build targets baseline x86-64, which has 2-wide vectors only.
#if defined(__x86_64__) && !defined(__clang__)
#define KESTREL_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KESTREL_VECTOR_CLONES
#endif

namespace kestrel::simd {

enum class Isa { Scalar, Avx2, Avx512 };

Isa active();              // the path in use: the widest the CPU has, or KESTREL_SIMD=scalar|avx2|avx512
bool supported(Isa isa);   // whether this CPU can run it
void set_active(Isa isa);  // tests and benchmarks: force a supported path (not thread-safe)
std::string name(Isa isa);

void exp(double* p, std::size_t n);
void log(double* p, std::size_t n);
void expm1(double* p, std::size_t n);
void log1p(double* p, std::size_t n);
void sin(double* p, std::size_t n);
void cos(double* p, std::size_t n);
// std::exp's bits (glibc's exp, < 0.52 ulp), on AVX-512 8 lanes at a time (glibc's algorithm, see vecmath.cpp): for
// results that must not move by an ulp, e.g. class scores whose argmax can tie to rounding. About 6x faster than
// std::exp entry by entry (bench hotpath/exp).
void exp_libm(double* p, std::size_t n);
// y[i] = atan2(y[i], x[i]).
void atan2(double* y, const double* x, std::size_t n);

// The largest entry of each row of an n_rows x n_cols column-major array (-inf for n_cols = 0; NaN is not expected),
// column by column: contiguous and vectorised, where Armadillo's max(P, 1) took one scalar maximum per entry through
// memory (12% of `reproduce advise`).
void row_max(const double* p, std::size_t n_rows, std::size_t n_cols, double* out);
inline arma::vec row_max(const arma::mat& m) {
  arma::vec out(m.n_rows);
  row_max(m.memptr(), m.n_rows, m.n_cols, out.memptr());
  return out;
}

// Single precision, for the long-context key sums (analysis/nested_attention.cpp). x[i] += a[i], returning the largest
// x[i] (-inf for n = 0; NaN is not expected).
float add_max(float* x, const float* a, std::size_t n);
// x[i] = exp(x[i] - shift) in single precision (libmvec's expf, at most 4 ulp); 0 where x[i] - shift < -87, so no
// result is subnormal (a product with subnormals is ~10x slower) and no lane takes libmvec's scalar underflow path.
// The terms lost are below e^-87 = 1.6e-38 of the largest (the key sums always hold a term 1).
void exp_shifted(float* x, std::size_t n, float shift);

// log(e^v - 1) = v + log(-expm1(-v)) of v = shift + scale p, for v > 0 (accurate for tiny and huge v alike); -inf
// for v <= 0, where the variance is 0 (an exact pair); NaN stays NaN.
void log_expm1(double* p, std::size_t n, double scale = 1, double shift = 0);
// log(cosh b - 1) = |b| - log 2 + 2 log(-expm1(-|b|)); -inf at b = 0.
void log_cosh_minus_one(double* p, std::size_t n);
// log(e^S + e^{-S}/2 - 1) = S + log1p(t (t/2 - 1)), t = e^{-S}, for S >= 0 (the real trigonometric estimator).
void log_trig_real(double* p, std::size_t n);

inline arma::mat& exp(arma::mat& m) {
  exp(m.memptr(), m.n_elem);
  return m;
}
inline arma::mat& exp_libm(arma::mat& m) {
  exp_libm(m.memptr(), m.n_elem);
  return m;
}
inline arma::mat& log(arma::mat& m) {
  log(m.memptr(), m.n_elem);
  return m;
}
inline arma::mat& log_expm1(arma::mat& m, double scale = 1, double shift = 0) {
  log_expm1(m.memptr(), m.n_elem, scale, shift);
  return m;
}

}  // namespace kestrel::simd
