// Streaming exact-variance statistics over all pairs (see pairwise.hpp).
#include "analysis/pairwise.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"

namespace kestrel {
namespace {

// One tile's summary from r = log(Var/K^2) and lk = log K: log Var = r + 2 lk, log(Var/K) = r + lk. Two passes (sums,
// then squared deviations from the tile mean) instead of a Welford update with a division per value; each sum is
// kept in kLanes partial sums, a fixed order the compiler can vectorise (one running sum cannot be reordered).
// Tiles are merged with Chan's formula in tile order.
constexpr std::size_t kLanes = 8;
using Vec = double __attribute__((vector_size(kLanes * sizeof(double))));  // GCC vector extension: 8 lanes
using Mask = long long __attribute__((vector_size(kLanes * sizeof(double))));

// kLanes values from p (the tail padded with pad): lane l holds entries l, l + kLanes, ...
inline __attribute__((always_inline)) Vec load(const double* p, std::size_t t, std::size_t n, double pad) {
  Vec v;
  if (t + kLanes <= n) {
    std::memcpy(&v, p + t, sizeof v);
    return v;
  }
  for (std::size_t l = 0; l < kLanes; ++l) v[l] = t + l < n ? p[t + l] : pad;
  return v;
}

// x where the mask is set, else 0 (a bitwise and, so the loop stays in vector registers).
inline __attribute__((always_inline)) Vec where(Mask m, Vec x) { return (Vec)((Mask)x & m); }

inline __attribute__((always_inline)) double total(Vec v) {
  double t = 0;
  for (std::size_t l = 0; l < kLanes; ++l) t += v[l];
  return t;
}

KESTREL_VECTOR_CLONES
PairwiseSummary summarize_tile(const Estimator& e, const arma::mat& r, const arma::mat& lk, arma::uword i0,
                               arma::uword j0) {
  const std::size_t n = r.n_elem;
  const double *pr = r.memptr(), *pk = lk.memptr();
  const Vec zero = {}, one = zero + 1, neg_inf = zero - HUGE_VAL;
  // Padding: r = -inf makes log Var = -inf (left out like an exact pair, and not counted, see below); k = 0.
  Vec n_ok = zero, sv = zero, sr = zero, sk = zero;
  Mask bad = {};
  for (std::size_t t = 0; t < n; t += kLanes) {
    const Vec rr = load(pr, t, n, -HUGE_VAL), kk = load(pk, t, n, 0.0), v = rr + 2 * kk;
    const Mask ok = v != neg_inf;  // Var = 0 (an exact pair): left out of the means of logs
    bad |= (v != v) | (v == -neg_inf);
    n_ok += where(ok, one);
    sv += where(ok, v);
    sr += where(ok, rr + kk);
    sk += kk;
  }
  for (std::size_t l = 0; l < kLanes; ++l)
    if (bad[l]) {
      for (std::size_t t = 0; t < n; ++t) {
        const double v = pr[t] + 2 * pk[t];
        if (std::isnan(v) || v == HUGE_VAL)
          throw NumericalError(fmt::format("estimator '{}': log-variance is {} at pair (x_{}, y_{})", e.info().name, v,
                                           i0 + t % r.n_rows, j0 + t / r.n_rows));
      }
    }
  const double ok_total = total(n_ok);
  const double mv = ok_total > 0 ? total(sv) / ok_total : 0, mr = ok_total > 0 ? total(sr) / ok_total : 0;
  const double mk = total(sk) / static_cast<double>(n);
  Vec qv = zero, qr = zero, qk = zero;
  for (std::size_t t = 0; t < n; t += kLanes) {
    const Vec rr = load(pr, t, n, -HUGE_VAL), kk = load(pk, t, n, mk), v = rr + 2 * kk;
    const Vec dv = v - mv, dr = rr + kk - mr, dk = kk - mk;
    const Mask ok = v != neg_inf;
    qv += where(ok, dv * dv);
    qr += where(ok, dr * dr);
    qk += dk * dk;  // padding k = mk adds 0
  }
  PairwiseSummary out;
  out.n_exact = static_cast<std::uint64_t>(static_cast<double>(n) - ok_total);
  if (ok_total > 0) {
    out.log_var = {ok_total, mv, total(qv)};
    out.log_rel_var = {ok_total, mr, total(qr)};
  }
  out.log_kernel = {static_cast<double>(n), mk, total(qk)};
  return out;
}

}  // namespace

PairwiseSummary summarize_exact_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                         arma::uword block, arma::uword M) {
  validate_pair(X, Y, e.dim());
  require(block > 0, "block size must be > 0, got 0");
  return map_fold_pair_blocks<PairwiseSummary>(
      X, Y, block,
      [&](const arma::mat& Xb, const arma::mat& Yb, arma::uword i0, arma::uword j0) {
        return summarize_tile(e, e.log_var_over_k2_m(Xb, Yb, M), log_kernel(k, Xb, Yb), i0, j0);
      },
      [](PairwiseSummary& acc, const PairwiseSummary& p) { acc.merge(p); }, PairwiseSummary{});
}

}  // namespace kestrel
