// libmvec dispatch for the array transcendentals (see vecmath.hpp).
#include "core/vecmath.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace kestrel::simd {
namespace {
#include "core/exp_table.inc"
}
}  // namespace kestrel::simd

#if defined(__x86_64__)
#include <immintrin.h>
// glibc's vector function ABI (x86_64 libmvec, "e" = AVX-512 with 8 lanes, "d" = AVX2 with 4 lanes).
// Each declaration carries the instruction set its vector type needs (clang checks that ABI at every call).
extern "C" {
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_exp(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_log(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_expm1(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_log1p(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_sin(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_cos(__m512d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_exp(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_log(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_expm1(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_log1p(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_sin(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_cos(__m256d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8vv_atan2(__m512d, __m512d);
__attribute__((target("avx2"))) __m256d _ZGVdN4vv_atan2(__m256d, __m256d);
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
}
#endif

namespace kestrel::simd {
namespace {

using ArrayFn = void (*)(double*, std::size_t);
using ArrayFn2 = void (*)(double*, const double*, std::size_t);  // p[i] = f(p[i], q[i])

#if defined(__x86_64__)
template <__m512d (*F)(__m512d)>
__attribute__((target("avx512f"))) void run512(double* p, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(p + i, F(_mm512_loadu_pd(p + i)));
  if (i == n) return;
  double t[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::copy(p + i, p + n, t);
  _mm512_storeu_pd(t, F(_mm512_loadu_pd(t)));
  std::copy(t, t + (n - i), p + i);
}

// exp with the lanes below -746 (exactly 0 in double) set to 0 around the call: libmvec hands a vector with any
// under- or overflowing lane to the scalar exp lane by lane, through libm's slow underflow handler (measured: 9% of
// crt-table1 in PoisRF/GeomRF features, where zero coordinates give -inf exponents). Same bits as run512<exp>.
__attribute__((target("avx512f"))) inline __m512d exp512_no_underflow(__m512d x) {
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
__attribute__((target("avx512f"))) inline __m512d exp_libm512(__m512d x) {
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
__attribute__((target("avx512f"))) void run512_2(double* p, const double* q, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(p + i, F(_mm512_loadu_pd(p + i), _mm512_loadu_pd(q + i)));
  if (i == n) return;
  double t[8] = {1, 1, 1, 1, 1, 1, 1, 1}, u[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::copy(p + i, p + n, t);
  std::copy(q + i, q + n, u);
  _mm512_storeu_pd(t, F(_mm512_loadu_pd(t), _mm512_loadu_pd(u)));
  std::copy(t, t + (n - i), p + i);
}

template <__m256d (*F)(__m256d, __m256d)>
__attribute__((target("avx2"))) void run256_2(double* p, const double* q, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(p + i, F(_mm256_loadu_pd(p + i), _mm256_loadu_pd(q + i)));
  if (i == n) return;
  double t[4] = {1, 1, 1, 1}, u[4] = {1, 1, 1, 1};
  std::copy(p + i, p + n, t);
  std::copy(q + i, q + n, u);
  _mm256_storeu_pd(t, F(_mm256_loadu_pd(t), _mm256_loadu_pd(u)));
  std::copy(t, t + (n - i), p + i);
}

template <__m256d (*F)(__m256d)>
__attribute__((target("avx2"))) void run256(double* p, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(p + i, F(_mm256_loadu_pd(p + i)));
  if (i == n) return;
  double t[4] = {1, 1, 1, 1};
  std::copy(p + i, p + n, t);
  _mm256_storeu_pd(t, F(_mm256_loadu_pd(t)));
  std::copy(t, t + (n - i), p + i);
}
#endif

template <double (*F)(double)>
void run_scalar(double* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = F(p[i]);
}
double s_exp(double x) { return std::exp(x); }
double s_log(double x) { return std::log(x); }
double s_expm1(double x) { return std::expm1(x); }
double s_log1p(double x) { return std::log1p(x); }
double s_sin(double x) { return std::sin(x); }
double s_cos(double x) { return std::cos(x); }
void s_atan2(double* p, const double* q, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = std::atan2(p[i], q[i]);
}

struct Table {
  ArrayFn exp, log, expm1, log1p, sin, cos, exp_libm;
  ArrayFn2 atan2;
};

Table table_for(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512)
    return {run512<exp512_no_underflow>, run512<_ZGVeN8v_log>, run512<_ZGVeN8v_expm1>, run512<_ZGVeN8v_log1p>,
            run512<_ZGVeN8v_sin>,        run512<_ZGVeN8v_cos>, run512<exp_libm512>,    run512_2<_ZGVeN8vv_atan2>};
  if (isa == Isa::Avx2)
    return {run256<_ZGVdN4v_exp>, run256<_ZGVdN4v_log>, run256<_ZGVdN4v_expm1>, run256<_ZGVdN4v_log1p>,
            run256<_ZGVdN4v_sin>, run256<_ZGVdN4v_cos>, run_scalar<s_exp>,      run256_2<_ZGVdN4vv_atan2>};
#endif
  (void)isa;
  return {run_scalar<s_exp>, run_scalar<s_log>, run_scalar<s_expm1>, run_scalar<s_log1p>,
          run_scalar<s_sin>, run_scalar<s_cos>, run_scalar<s_exp>,   s_atan2};
}

Isa widest() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Scalar;
}

Isa initial() {
  const char* env = std::getenv("KESTREL_SIMD");
  if (env == nullptr || *env == '\0') return widest();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (name(isa) == env) {
      require(supported(isa), "KESTREL_SIMD={}: this CPU does not support it", env);
      return isa;
    }
  throw InvalidArgument(fmt::format("KESTREL_SIMD must be scalar, avx2 or avx512, got '{}'", env));
}

struct State {
  Isa isa = initial();
  Table fn = table_for(isa);
};
State& state() {
  static State s;
  return s;
}

// Composite transforms work through a small stack buffer so that every pass stays in L1.
constexpr std::size_t kChunk = 512;

}  // namespace

bool supported(Isa isa) {
  if (isa == Isa::Scalar) return true;
  const Isa w = widest();
  return w == Isa::Avx512 || (w == Isa::Avx2 && isa == Isa::Avx2);
}

Isa active() { return state().isa; }

void set_active(Isa isa) {
  require(supported(isa), "SIMD path '{}' is not supported by this CPU", name(isa));
  state().isa = isa;
  state().fn = table_for(isa);
}

std::string name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

void exp(double* p, std::size_t n) { state().fn.exp(p, n); }
void log(double* p, std::size_t n) { state().fn.log(p, n); }
void expm1(double* p, std::size_t n) { state().fn.expm1(p, n); }
void log1p(double* p, std::size_t n) { state().fn.log1p(p, n); }
void sin(double* p, std::size_t n) { state().fn.sin(p, n); }
void cos(double* p, std::size_t n) { state().fn.cos(p, n); }
void exp_libm(double* p, std::size_t n) { state().fn.exp_libm(p, n); }
void atan2(double* y, const double* x, std::size_t n) { state().fn.atan2(y, x, n); }

// t = log(1 - e^{-u}) = log(-expm1(-u)) for u >= 0 (a chunk of m values): the shared core of the transforms below.
inline __attribute__((always_inline)) void log1mexp_neg(const double* u, double* t, std::size_t m) {
  for (std::size_t k = 0; k < m; ++k) t[k] = -u[k];
  expm1(t, m);
  for (std::size_t k = 0; k < m; ++k) t[k] = -t[k];
  log(t, m);
}

KESTREL_VECTOR_CLONES
void row_max(const double* p, std::size_t n_rows, std::size_t n_cols, double* out) {
  for (std::size_t i = 0; i < n_rows; ++i) out[i] = -HUGE_VAL;
  for (std::size_t j = 0; j < n_cols; ++j) {
    const double* c = p + j * n_rows;
    for (std::size_t i = 0; i < n_rows; ++i) out[i] = out[i] < c[i] ? c[i] : out[i];
  }
}

KESTREL_VECTOR_CLONES
void log_expm1(double* p, std::size_t n, double scale, double shift) {
  double t[kChunk];
  for (std::size_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - i0);
    double* v = p + i0;
    for (std::size_t k = 0; k < m; ++k) v[k] = shift + scale * v[k];
    log1mexp_neg(v, t, m);
    for (std::size_t k = 0; k < m; ++k) v[k] = v[k] <= 0 ? -HUGE_VAL : v[k] + t[k];
  }
}

KESTREL_VECTOR_CLONES
void log_cosh_minus_one(double* p, std::size_t n) {
  double t[kChunk];
  for (std::size_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - i0);
    double* v = p + i0;
    for (std::size_t k = 0; k < m; ++k) v[k] = std::abs(v[k]);
    log1mexp_neg(v, t, m);
    for (std::size_t k = 0; k < m; ++k) v[k] = v[k] == 0 ? -HUGE_VAL : (v[k] - M_LN2) + 2 * t[k];
  }
}

KESTREL_VECTOR_CLONES
void log_trig_real(double* p, std::size_t n) {
  double t[kChunk];
  for (std::size_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - i0);
    double* v = p + i0;
    for (std::size_t k = 0; k < m; ++k) t[k] = -v[k];
    exp(t, m);
    for (std::size_t k = 0; k < m; ++k) t[k] *= 0.5 * t[k] - 1;
    log1p(t, m);
    for (std::size_t k = 0; k < m; ++k) v[k] += t[k];
  }
}

// ----- single precision (add_max, exp_shifted) -----

namespace {

// exp_shifted's results below e^-87 are 0: they would be subnormal below e^-87.34 (FLT_MIN), and a matrix product with
// subnormal entries runs ~10x slower (microcode assists; measured: the clustered HRF's key sums at L = 131072, whose
// features span e^-100 and more, took 44 s a row instead of ~10).
constexpr float kFlushBelow = -87.0f;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float add_max512(float* x, const float* a, std::size_t n) {
  __m512 top = _mm512_set1_ps(-HUGE_VALF);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(a + i));
    _mm512_storeu_ps(x + i, v);
    top = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), top, v);  // _mm512_max_ps warns (GCC 12)
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, top);
  float m = *std::max_element(lanes, lanes + 16);
  for (; i < n; ++i) m = std::max(m, x[i] += a[i]);
  return m;
}

// exp(x - shift) with the lanes below -87 set to 0 around the call (see vecmath.hpp).
__attribute__((target("avx512f"))) __m512 expf512(__m512 x, __m512 shift) {
  const __m512 zero = _mm512_setzero_ps(), v = _mm512_sub_ps(x, shift);
  const __mmask16 under = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kFlushBelow), _CMP_LT_OQ);
  if (under == 0) return _ZGVeN16v_expf(v);
  return _mm512_mask_blend_ps(under, _ZGVeN16v_expf(_mm512_mask_blend_ps(under, v, zero)), zero);
}

__attribute__((target("avx512f"))) void exp_shifted512(float* x, std::size_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, expf512(_mm512_loadu_ps(x + i), s));
  if (i == n) return;
  float t[16];
  std::fill(t, t + 16, shift);
  std::copy(x + i, x + n, t);
  _mm512_storeu_ps(t, expf512(_mm512_loadu_ps(t), s));
  std::copy(t, t + (n - i), x + i);
}

__attribute__((target("avx2"))) float add_max256(float* x, const float* a, std::size_t n) {
  __m256 top = _mm256_set1_ps(-HUGE_VALF);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(a + i));
    _mm256_storeu_ps(x + i, v);
    top = _mm256_max_ps(top, v);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, top);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < n; ++i) m = std::max(m, x[i] += a[i]);
  return m;
}

__attribute__((target("avx2"))) __m256 expf256(__m256 x, __m256 shift) {
  const __m256 zero = _mm256_setzero_ps(), v = _mm256_sub_ps(x, shift);
  const __m256 under = _mm256_cmp_ps(v, _mm256_set1_ps(kFlushBelow), _CMP_LT_OQ);
  if (_mm256_movemask_ps(under) == 0) return _ZGVdN8v_expf(v);
  return _mm256_blendv_ps(_ZGVdN8v_expf(_mm256_blendv_ps(v, zero, under)), zero, under);
}

__attribute__((target("avx2"))) void exp_shifted256(float* x, std::size_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, expf256(_mm256_loadu_ps(x + i), s));
  if (i == n) return;
  float t[8];
  std::fill(t, t + 8, shift);
  std::copy(x + i, x + n, t);
  _mm256_storeu_ps(t, expf256(_mm256_loadu_ps(t), s));
  std::copy(t, t + (n - i), x + i);
}
#endif

float add_max_scalar(float* x, const float* a, std::size_t n) {
  float m = -HUGE_VALF;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, x[i] += a[i]);
  return m;
}

void exp_shifted_scalar(float* x, std::size_t n, float shift) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i] - shift;
    x[i] = v < kFlushBelow ? 0.0f : std::exp(v);
  }
}

}  // namespace

float add_max(float* x, const float* a, std::size_t n) {
#if defined(__x86_64__)
  if (active() == Isa::Avx512) return add_max512(x, a, n);
  if (active() == Isa::Avx2) return add_max256(x, a, n);
#endif
  return add_max_scalar(x, a, n);
}

void exp_shifted(float* x, std::size_t n, float shift) {
#if defined(__x86_64__)
  if (active() == Isa::Avx512) return exp_shifted512(x, n, shift);
  if (active() == Isa::Avx2) return exp_shifted256(x, n, shift);
#endif
  exp_shifted_scalar(x, n, shift);
}

}  // namespace kestrel::simd
