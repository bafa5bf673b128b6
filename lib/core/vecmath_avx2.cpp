// The AVX2 paths of vecmath.cpp (libmvec's "d" variants, 4 doubles or 8 floats a call), in a file of their own compiled
// with -mavx2: clang passes a 256-bit vector argument in registers only where the whole file targets AVX (a target
// attribute on the function is not enough), and libmvec reads its arguments from the registers. Called only when the
// CPU has AVX2 and FMA (vecmath.cpp chooses).
#include "core/vecmath_isa.hpp"

#if defined(__x86_64__)
#include <cmath>

#include <immintrin.h>

// glibc's vector function ABI (x86_64 libmvec, "d" = AVX2).
extern "C" {
__m256d _ZGVdN4v_exp(__m256d);
__m256d _ZGVdN4v_log(__m256d);
__m256d _ZGVdN4v_expm1(__m256d);
__m256d _ZGVdN4v_log1p(__m256d);
__m256d _ZGVdN4v_sin(__m256d);
__m256d _ZGVdN4v_cos(__m256d);
__m256d _ZGVdN4vv_atan2(__m256d, __m256d);
__m256 _ZGVdN8v_expf(__m256);
}

namespace kestrel::simd::paths {
namespace {

template <__m256d (*F)(__m256d)>
void run256(double* p, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(p + i, F(_mm256_loadu_pd(p + i)));
  if (i == n) return;
  double t[4] = {1, 1, 1, 1};
  copy(p + i, p + n, t);
  _mm256_storeu_pd(t, F(_mm256_loadu_pd(t)));
  copy(t, t + (n - i), p + i);
}

template <__m256d (*F)(__m256d, __m256d)>
void run256_2(double* p, const double* q, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(p + i, F(_mm256_loadu_pd(p + i), _mm256_loadu_pd(q + i)));
  if (i == n) return;
  double t[4] = {1, 1, 1, 1}, u[4] = {1, 1, 1, 1};
  copy(p + i, p + n, t);
  copy(q + i, q + n, u);
  _mm256_storeu_pd(t, F(_mm256_loadu_pd(t), _mm256_loadu_pd(u)));
  copy(t, t + (n - i), p + i);
}

float add_max256(float* x, const float* a, std::size_t n) {
  __m256 top = _mm256_set1_ps(-HUGE_VALF);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(a + i));
    _mm256_storeu_ps(x + i, v);
    top = _mm256_max_ps(top, v);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, top);
  float m = largest(lanes, 8);
  for (; i < n; ++i) m = bigger(m, x[i] += a[i]);
  return m;
}

__m256 expf256(__m256 x, __m256 shift) {
  const __m256 zero = _mm256_setzero_ps(), v = _mm256_sub_ps(x, shift);
  const __m256 under = _mm256_cmp_ps(v, _mm256_set1_ps(kFlushBelow), _CMP_LT_OQ);
  if (_mm256_movemask_ps(under) == 0) return _ZGVdN8v_expf(v);
  return _mm256_blendv_ps(_ZGVdN8v_expf(_mm256_blendv_ps(v, zero, under)), zero, under);
}

void exp_shifted256(float* x, std::size_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, expf256(_mm256_loadu_ps(x + i), s));
  if (i == n) return;
  float t[8];
  fill(t, t + 8, shift);
  copy(x + i, x + n, t);
  _mm256_storeu_ps(t, expf256(_mm256_loadu_ps(t), s));
  copy(t, t + (n - i), x + i);
}

}  // namespace

Table table_avx2(ArrayFn exp_libm) {
  return {run256<_ZGVdN4v_exp>,
          run256<_ZGVdN4v_log>,
          run256<_ZGVdN4v_expm1>,
          run256<_ZGVdN4v_log1p>,
          run256<_ZGVdN4v_sin>,
          run256<_ZGVdN4v_cos>,
          exp_libm,
          run256_2<_ZGVdN4vv_atan2>};
}
float add_max_avx2(float* x, const float* a, std::size_t n) { return add_max256(x, a, n); }
void exp_shifted_avx2(float* x, std::size_t n, float shift) { exp_shifted256(x, n, shift); }

}  // namespace kestrel::simd::paths
#endif
