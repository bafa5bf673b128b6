// GeomRF's pairwise sums two pairs at a time in AVX-512's 8 lanes (geometric_kernel.hpp), called only when
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
  static constexpr int kPairs = 2;
  using V = __m512d;
  using I = __m512i;
  using M = __mmask8;
  static V load_x(const double* const* x, arma::uword l) {
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(x[0] + l)), _mm256_loadu_pd(x[1] + l), 1);
  }
  static V load_y(const double* y, arma::uword l) { return _mm512_broadcast_f64x4(_mm256_loadu_pd(y + l)); }
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
  static bool any_of_pair(M m, int p) { return (m >> (4 * p) & 0xF) != 0; }
};

}  // namespace

void geometric_sums8(const GeomConstants& c, const double* xs, const double* ys, arma::mat& out) {
  for (arma::uword j = 0; j < out.n_cols; ++j) {
    const double* y = ys + j * c.dp;
    for (arma::uword i = 0; i < out.n_rows; i += 2) {
      // an odd last row runs as both pairs of the vector (the same bits) and keeps the first
      const double* x[2] = {xs + i * c.dp, xs + std::min(i + 1, out.n_rows - 1) * c.dp};
      double h[2];
      geometric_pairs<Lanes8>(c, x, y, h);
      out(i, j) = h[0];
      if (i + 1 < out.n_rows) out(i + 1, j) = h[1];
    }
  }
}

}  // namespace kestrel::geometric_detail
#pragma GCC pop_options
#endif
