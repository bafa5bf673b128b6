// The LUNA feature map (LUNA section 3.2, eq. 11) written once as a template over the scalar type, so the
// same code evaluates it in double and in Ceres Jets (automatic differentiation, luna/fit.cpp):
//   phi(x) = g(x) P^-1/2 [psi_c(w_p^T x + b_p)]_{p=1..P, c=1..C},  psi_c(z) = sum_k A_ck sin(u_k z + v_k),
// a bank of h sinusoidal units (u_k, v_k) shared by the C channels, and the envelope g(x) = exp(gw^T x + gg |x|^2)
// (1 when ungated). Feature column p*C + c. Internal header: include luna.hpp instead.
#pragma once
#include <cmath>
#include <cstddef>

namespace kestrel::luna_detail {

// Raw views of the parameter groups: W row-major P x d (w_p contiguous), b[P], u[h], v[h], A row-major C x h,
// gw[d], gg[1]; gw and gg are ignored when !gated.
template <typename T>
struct MapRef {
  const T *W, *b, *u, *v, *A, *gw, *gg;
  std::size_t P, d, C, h;
  bool gated;
};

// Writes the M = P*C features of the point x (d doubles) to out; hidden[h] is scratch space.
template <typename T>
void phi_point(const MapRef<T>& r, const double* x, T* out, T* hidden) {
  using std::exp;
  using std::sin;
  using std::sqrt;
  T g = T(1.0 / sqrt(static_cast<double>(r.P)));
  if (r.gated) {
    double sq = 0;
    for (std::size_t j = 0; j < r.d; ++j) sq += x[j] * x[j];
    T s = r.gg[0] * sq;
    for (std::size_t j = 0; j < r.d; ++j) s += r.gw[j] * x[j];
    g *= exp(s);
  }
  for (std::size_t p = 0; p < r.P; ++p) {
    T z = r.b[p];
    for (std::size_t j = 0; j < r.d; ++j) z += r.W[p * r.d + j] * x[j];
    for (std::size_t k = 0; k < r.h; ++k) hidden[k] = sin(r.u[k] * z + r.v[k]);
    for (std::size_t c = 0; c < r.C; ++c) {
      T psi = T(0.0);
      for (std::size_t k = 0; k < r.h; ++k) psi += r.A[c * r.h + k] * hidden[k];
      out[p * r.C + c] = g * psi;
    }
  }
}

}  // namespace kestrel::luna_detail
