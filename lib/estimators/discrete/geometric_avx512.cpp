// GeomRF's pairwise sums eight pairs at a time in AVX-512's lanes (geometric_kernel.hpp), called only when
// simd::active() is AVX-512. Only the kernel is compiled for x86-64-v4 (the pragma after the library headers, so that
// no inline function shared with other files is); its compares and selects are intrinsics: GCC 12 turns 512-bit
// vector-extension compares into scalar code.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include <armadillo>

#include "estimators/discrete/discrete.hpp"

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive on _mm512_undefined in the intrinsics
#include "estimators/discrete/geometric_kernel.hpp"

namespace kestrel::geometric_detail {
namespace {

struct Lanes8 {
  static constexpr int kWidth = 8;
  using V = __m512d;
  using I = __m512i;
  using M = __mmask8;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static M lt(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }  // false for NaN, as a < b
  static M ge(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ); }
  static M le(V a, V b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
  static V sel(M m, V a, V b) { return _mm512_mask_blend_pd(m, b, a); }
  static I sel(M m, I a, I b) { return _mm512_mask_blend_epi64(m, b, a); }
  static M both(M a, M b) { return a & b; }
  static M either(M a, M b) { return a | b; }
  static M neither(M a, M b) { return static_cast<M>(~(a | b)); }
  static M none() { return 0; }
  static bool any(M m) { return m != 0; }
  static V sqrt(V a) { return _mm512_sqrt_pd(a); }
  static V recip_seed(V z) { return _mm512_cvtps_pd(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm512_cvtpd_ps(z))); }
};

}  // namespace

void geometric_sums8(const GeomConstants& c, const double* xt, arma::uword ldx, const double* ys, arma::mat& out) {
  for (arma::uword j = 0; j < out.n_cols; ++j) {
    const double* y = ys + j * c.d;
    for (arma::uword i = 0; i < out.n_rows; i += 8) {
      double h[8];
      geometric_lanes<Lanes8>(c, xt + i, ldx, y, h);
      std::copy_n(h, std::min<arma::uword>(8, out.n_rows - i), out.colptr(j) + i);
    }
  }
}

}  // namespace kestrel::geometric_detail
#pragma GCC pop_options
#endif
