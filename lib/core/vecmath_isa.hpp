// Inside vecmath.cpp: the function tables of its instruction-set paths, each compiled in a file of its own
// (vecmath_avx512.cpp with -mavx512f, vecmath_avx2.cpp with -mavx2: CMakeLists.txt).
#pragma once
#include <cstddef>

namespace kestrel::simd::paths {

using ArrayFn = void (*)(double*, std::size_t);
using ArrayFn2 = void (*)(double*, const double*, std::size_t);  // p[i] = f(p[i], q[i])

struct Table {
  ArrayFn exp, log, expm1, log1p, sin, cos, exp_libm;
  ArrayFn2 atan2;
};

// exp_shifted's results below e^-87 are 0: they would be subnormal below e^-87.34 (FLT_MIN), and a matrix product with
// subnormal entries runs ~10x slower (microcode assists; measured: the clustered HRF's key sums at L = 131072, whose
// features span e^-100 and more, took 44 s a row instead of ~10).
inline constexpr float kFlushBelow = -87.0f;

#if defined(__x86_64__)
Table table_avx512();
float add_max_avx512(float* x, const float* a, std::size_t n);
void exp_shifted_avx512(float* x, std::size_t n, float shift);
Table table_avx2(ArrayFn exp_libm);  // AVX2 has no exp_libm of its own: the scalar one is passed in
float add_max_avx2(float* x, const float* a, std::size_t n);
void exp_shifted_avx2(float* x, std::size_t n, float shift);
#endif

// For the path files: plain loops instead of <algorithm>, of internal linkage (an inline function of external linkage
// instantiated there would be compiled for that instruction set, and the linker could keep that copy for every file).
namespace {
template <class T>
void copy(const T* first, const T* last, T* out) {
  for (; first != last; ++first, ++out) *out = *first;
}
template <class T>
void fill(T* first, T* last, T value) {
  for (; first != last; ++first) *first = value;
}
template <class T>
T bigger(T a, T b) {
  return a < b ? b : a;
}
template <class T>
T largest(const T* x, std::size_t n) {
  T m = x[0];
  for (std::size_t i = 1; i < n; ++i) m = bigger(m, x[i]);
  return m;
}
}  // namespace

}  // namespace kestrel::simd::paths
