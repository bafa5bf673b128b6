// The AVX-512 paths of vecmath.cpp (libmvec's "e" variants, 8 doubles or 16 floats a call), in a file of their own
// compiled with -mavx512f: clang passes a 512-bit vector argument in registers only where the whole file targets
// AVX-512 (a target attribute on the function is not enough), and libmvec reads its arguments from the registers.
// Called only when the CPU has AVX-512 (vecmath.cpp chooses).
#include "core/vecmath_isa.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <cstdint>

#include <immintrin.h>

// glibc's vector function ABI (x86_64 libmvec, "e" = AVX-512).
extern "C" {
__m512d _ZGVeN8v_exp(__m512d);
__m512d _ZGVeN8v_log(__m512d);
__m512d _ZGVeN8v_expm1(__m512d);
__m512d _ZGVeN8v_log1p(__m512d);
__m512d _ZGVeN8v_sin(__m512d);
__m512d _ZGVeN8v_cos(__m512d);
__m512d _ZGVeN8vv_atan2(__m512d, __m512d);
__m512 _ZGVeN16v_expf(__m512);
}

namespace kestrel::simd::paths {
namespace {
#include "core/exp_table.inc"

template <__m512d (*F)(__m512d)>
void run512(double* p, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(p + i, F(_mm512_loadu_pd(p + i)));
  if (i == n) return;
  double t[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  copy(p + i, p + n, t);
  _mm512_storeu_pd(t, F(_mm512_loadu_pd(t)));
  copy(t, t + (n - i), p + i);
}

// exp with the lanes below -746 (exactly 0 in double) set to 0 around the call: libmvec hands a vector with any
// under- or overflowing lane to the scalar exp lane by lane, through libm's slow underflow handler (measured: 9% of
// crt-table1 in PoisRF/GeomRF features, where zero coordinates give -inf exponents). Same bits as run512<exp>.
inline __m512d exp512_no_underflow(__m512d x) {
  const __m512d zero = _mm512_setzero_pd();
  const __mmask8 under = _mm512_cmp_pd_mask(x, _mm512_set1_pd(-746.0), _CMP_LT_OQ);
  if (under == 0) return _ZGVeN8v_exp(x);
  return _mm512_mask_blend_pd(under, _ZGVeN8v_exp(_mm512_mask_blend_pd(under, x, zero)), zero);
}

// glibc 2.36's scalar exp as x86-64 runs it (__exp_fma: sysdeps/ieee754/dbl-64/e_exp.c, Arm's optimized-routines
// algorithm, compiled with FMA contraction), evaluated 8 lanes at a time with the same operations in the same order,
// so each lane has std::exp's bits (test VecMath.ExpLibmIsStdExpBitForBit). exp(x) = 2^(k/128) e^r: k = round(128 x /
// ln 2) through the 1.5 2^52 shift, r = x - k ln2/128 in two FMAs, e^r - 1 by a degree-5 polynomial, 2^(k/128) from
// the table of scripts/exp_table.py. The constants are glibc's __exp_data (invln2N, negln2hiN, negln2loN, poly, shift).
// Lanes with 512 <= -x < 1024 take glibc's subnormal-range special case, also in vector form; x < -1024 (and -inf)
// give +0 as glibc does; NaN, +inf and x >= 512 go to std::exp lane by lane.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive on _mm512_undefined in the intrinsics
#endif
inline __m512d exp_libm512(__m512d x) {
  const __m512d shift = _mm512_set1_pd(0x1.8p52);
  const __m512i abstop = _mm512_and_epi64(_mm512_srli_epi64(_mm512_castpd_si512(x), 52), _mm512_set1_epi64(0x7ff));
  const __mmask8 tiny = _mm512_cmplt_epu64_mask(abstop, _mm512_set1_epi64(0x3c9));   // |x| < 2^-54: 1 + x
  const __mmask8 large = _mm512_cmpge_epu64_mask(abstop, _mm512_set1_epi64(0x408));  // |x| >= 512
  const __mmask8 huge = _mm512_cmpge_epu64_mask(abstop, _mm512_set1_epi64(0x409));   // |x| >= 1024, inf, NaN
  const __mmask8 negative = _mm512_cmplt_pd_mask(x, _mm512_setzero_pd());            // false for NaN
  const __m512d z = _mm512_fmadd_pd(x, _mm512_set1_pd(0x1.71547652b82fep7), shift);
  const __m512i ki = _mm512_castpd_si512(z);
  const __m512d kd = _mm512_sub_pd(z, shift);
  __m512d r = _mm512_fmadd_pd(kd, _mm512_set1_pd(-0x1.62e42fefa0000p-8), x);
  r = _mm512_fmadd_pd(kd, _mm512_set1_pd(-0x1.cf79abc9e3b3ap-47), r);
  const __m512i j = _mm512_and_epi64(ki, _mm512_set1_epi64(127));
  const __m512d tail = _mm512_i64gather_pd(j, reinterpret_cast<const double*>(kExpTail), 8);
  const __m512i sbits = _mm512_add_epi64(_mm512_i64gather_epi64(j, reinterpret_cast<const long long*>(kExpScale), 8),
                                         _mm512_slli_epi64(ki, 45));
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d p23 = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.555555555543cp-3), _mm512_set1_pd(0x1.ffffffffffdbdp-2));
  const __m512d p45 = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.1111167a4d017p-7), _mm512_set1_pd(0x1.55555cf172b91p-5));
  const __m512d t = _mm512_fmadd_pd(p23, r2, _mm512_add_pd(r, tail));
  const __m512d tmp = _mm512_fmadd_pd(_mm512_mul_pd(r2, r2), p45, t);
  const __m512d scale = _mm512_castsi512_pd(sbits);
  __m512d y = _mm512_fmadd_pd(scale, tmp, scale);
  y = _mm512_mask_add_pd(y, tiny, x, _mm512_set1_pd(1.0));
  const __mmask8 sub = large & ~huge & negative;
  if (sub) {  // glibc's specialcase for k < 0: scale 2^1022 up, round once, scale down (no fused operations here)
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(sbits, _mm512_set1_epi64(1022LL << 52)));
    // an explicitly rounded product: GCC would otherwise contract it into the additions below, and glibc's doesn't
    const __m512d st = _mm512_mul_round_pd(s, tmp, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d v = _mm512_add_pd(s, st);
    const __mmask8 below1 = _mm512_cmplt_pd_mask(v, _mm512_set1_pd(1.0));
    const __m512d hi = _mm512_add_pd(v, _mm512_set1_pd(1.0));
    const __m512d lo = _mm512_add_pd(_mm512_sub_pd(s, v), st);
    const __m512d lo2 = _mm512_add_pd(_mm512_add_pd(_mm512_sub_pd(_mm512_set1_pd(1.0), hi), v), lo);
    // glibc's y == 0 -> +0 needs nothing: (lo2 + hi) - 1 is never -0 in round-to-nearest
    v = _mm512_mask_sub_pd(v, below1, _mm512_add_pd(lo2, hi), _mm512_set1_pd(1.0));
    y = _mm512_mask_mul_pd(y, sub, v, _mm512_set1_pd(0x1p-1022));
  }
  y = _mm512_mask_mov_pd(y, huge & negative, _mm512_setzero_pd());
  const __mmask8 other = large & ~negative;
  if (other) {  // NaN, +inf, x >= 512: overflow and its special cases, rare
    alignas(64) double in[8], out[8];
    _mm512_store_pd(in, x);
    _mm512_store_pd(out, y);
    for (int l = 0; l < 8; ++l)
      if (other >> l & 1) out[l] = std::exp(in[l]);
    y = _mm512_load_pd(out);
  }
  return y;
}
#pragma GCC diagnostic pop

template <__m512d (*F)(__m512d, __m512d)>
void run512_2(double* p, const double* q, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(p + i, F(_mm512_loadu_pd(p + i), _mm512_loadu_pd(q + i)));
  if (i == n) return;
  double t[8] = {1, 1, 1, 1, 1, 1, 1, 1}, u[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  copy(p + i, p + n, t);
  copy(q + i, q + n, u);
  _mm512_storeu_pd(t, F(_mm512_loadu_pd(t), _mm512_loadu_pd(u)));
  copy(t, t + (n - i), p + i);
}

float add_max512(float* x, const float* a, std::size_t n) {
  __m512 top = _mm512_set1_ps(-HUGE_VALF);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(a + i));
    _mm512_storeu_ps(x + i, v);
    top = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), top, v);  // _mm512_max_ps warns (GCC 12)
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, top);
  float m = largest(lanes, 16);
  for (; i < n; ++i) m = bigger(m, x[i] += a[i]);
  return m;
}

// exp(x - shift) with the lanes below -87 set to 0 around the call (see vecmath.hpp).
__m512 expf512(__m512 x, __m512 shift) {
  const __m512 zero = _mm512_setzero_ps(), v = _mm512_sub_ps(x, shift);
  const __mmask16 under = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kFlushBelow), _CMP_LT_OQ);
  if (under == 0) return _ZGVeN16v_expf(v);
  return _mm512_mask_blend_ps(under, _ZGVeN16v_expf(_mm512_mask_blend_ps(under, v, zero)), zero);
}

void exp_shifted512(float* x, std::size_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, expf512(_mm512_loadu_ps(x + i), s));
  if (i == n) return;
  float t[16];
  fill(t, t + 16, shift);
  copy(x + i, x + n, t);
  _mm512_storeu_ps(t, expf512(_mm512_loadu_ps(t), s));
  copy(t, t + (n - i), x + i);
}

}  // namespace

Table table_avx512() {
  return {run512<exp512_no_underflow>, run512<_ZGVeN8v_log>, run512<_ZGVeN8v_expm1>, run512<_ZGVeN8v_log1p>,
          run512<_ZGVeN8v_sin>,        run512<_ZGVeN8v_cos>, run512<exp_libm512>,    run512_2<_ZGVeN8vv_atan2>};
}
float add_max_avx512(float* x, const float* a, std::size_t n) { return add_max512(x, a, n); }
void exp_shifted_avx512(float* x, std::size_t n, float shift) { exp_shifted512(x, n, shift); }

}  // namespace kestrel::simd::paths
#endif
