// libmvec dispatch for the array transcendentals (see vecmath.hpp): the scalar path here, the AVX-512 and AVX2 paths
// in vecmath_avx512.cpp and vecmath_avx2.cpp, chosen once from the CPU.
#include "core/vecmath.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/vecmath_isa.hpp"

namespace kestrel::simd {
namespace {

using paths::Table;

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

Table table_for(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512) return paths::table_avx512();
  if (isa == Isa::Avx2) return paths::table_avx2(run_scalar<s_exp>);
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

using paths::kFlushBelow;

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
  if (active() == Isa::Avx512) return paths::add_max_avx512(x, a, n);
  if (active() == Isa::Avx2) return paths::add_max_avx2(x, a, n);
#endif
  return add_max_scalar(x, a, n);
}

void exp_shifted(float* x, std::size_t n, float shift) {
#if defined(__x86_64__)
  if (active() == Isa::Avx512) return paths::exp_shifted_avx512(x, n, shift);
  if (active() == Isa::Avx2) return paths::exp_shifted_avx2(x, n, shift);
#endif
  exp_shifted_scalar(x, n, shift);
}

}  // namespace kestrel::simd
