// Streaming exact-variance statistics over all pairs (see pairwise.hpp).
#include "analysis/pairwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kestrel {
namespace {

// One tile's summary from r = log(Var/K^2) and lk = log K: log Var = r + 2 lk, log(Var/K) = r + lk. Two passes (sums,
// then squared deviations from the tile mean) instead of a Welford update with a division per value; each sum is
// kept in kLanes partial sums (lane l holds entries l, l + kLanes, ...), a fixed order that vectorises (one running
// sum cannot be reordered). Tiles are merged with Chan's formula in tile order.
// Var = 0 (an exact pair, log Var = -inf) is left out of the means of logs. The AVX-512 path is written with
// intrinsics: GCC 12 lowered the same loop in generic vector types to scalar compares (27% of the pairwise variance's
// time); the portable path does the same operations lane by lane, so both give the same bits.
constexpr std::size_t kLanes = 8;

struct TileSums {
  double n_ok[kLanes] = {}, sv[kLanes] = {}, sr[kLanes] = {}, sk[kLanes] = {};  // first pass
  double qv[kLanes] = {}, qr[kLanes] = {}, qk[kLanes] = {};                     // second pass
};

double total(const double (&v)[kLanes]) {
  double t = 0;
  for (std::size_t l = 0; l < kLanes; ++l) t += v[l];
  return t;
}

// The tail of n (< kLanes entries from p) padded with pad.
void padded(const double* p, std::size_t n, double pad, double (&out)[kLanes]) {
  for (std::size_t l = 0; l < kLanes; ++l) out[l] = l < n ? p[l] : pad;
}

// First pass over n entries (the tail padded with r = -inf, left out and not counted, and k = 0).
KESTREL_VECTOR_CLONES void first_pass(const double* pr, const double* pk, std::size_t n, TileSums& s) {
  double tr[kLanes], tk[kLanes];
  for (std::size_t t = 0; t < n; t += kLanes) {
    const bool tail = t + kLanes > n;
    if (tail) padded(pr + t, n - t, -HUGE_VAL, tr), padded(pk + t, n - t, 0.0, tk);
    for (std::size_t l = 0; l < kLanes; ++l) {
      const double rr = tail ? tr[l] : pr[t + l], kk = tail ? tk[l] : pk[t + l], v = rr + (kk + kk);
      if (v != -HUGE_VAL) s.n_ok[l] += 1.0, s.sv[l] += v, s.sr[l] += rr + kk;
      s.sk[l] += kk;
    }
  }
}

// Second pass: squared deviations from the means (the tail padded with r = -inf and k = mk, which add nothing).
KESTREL_VECTOR_CLONES void second_pass(const double* pr, const double* pk, std::size_t n, double mv, double mr,
                                       double mk, TileSums& s) {
  double tr[kLanes], tk[kLanes];
  for (std::size_t t = 0; t < n; t += kLanes) {
    const bool tail = t + kLanes > n;
    if (tail) padded(pr + t, n - t, -HUGE_VAL, tr), padded(pk + t, n - t, mk, tk);
    for (std::size_t l = 0; l < kLanes; ++l) {
      const double rr = tail ? tr[l] : pr[t + l], kk = tail ? tk[l] : pk[t + l], v = rr + (kk + kk);
      const double dv = v - mv, dr = (rr + kk) - mr, dk = kk - mk;
      if (v != -HUGE_VAL) s.qv[l] += dv * dv, s.qr[l] += dr * dr;
      s.qk[l] = std::fma(dk, dk, s.qk[l]);
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void first_pass512(const double* pr, const double* pk, std::size_t n, TileSums& s) {
  const __m512d one = _mm512_set1_pd(1.0), neg_inf = _mm512_set1_pd(-HUGE_VAL);
  __m512d n_ok = _mm512_setzero_pd(), sv = n_ok, sr = n_ok, sk = n_ok;
  double tr[kLanes], tk[kLanes];
  for (std::size_t t = 0; t < n; t += kLanes) {
    const bool tail = t + kLanes > n;
    if (tail) padded(pr + t, n - t, -HUGE_VAL, tr), padded(pk + t, n - t, 0.0, tk);
    const __m512d rr = _mm512_loadu_pd(tail ? tr : pr + t), kk = _mm512_loadu_pd(tail ? tk : pk + t);
    const __m512d v = _mm512_add_pd(rr, _mm512_add_pd(kk, kk));
    const __mmask8 ok = _mm512_cmp_pd_mask(v, neg_inf, _CMP_NEQ_UQ);
    n_ok = _mm512_mask_add_pd(n_ok, ok, n_ok, one);
    sv = _mm512_mask_add_pd(sv, ok, sv, v);
    sr = _mm512_mask_add_pd(sr, ok, sr, _mm512_add_pd(rr, kk));
    sk = _mm512_add_pd(sk, kk);
  }
  _mm512_storeu_pd(s.n_ok, n_ok), _mm512_storeu_pd(s.sv, sv), _mm512_storeu_pd(s.sr, sr), _mm512_storeu_pd(s.sk, sk);
}

__attribute__((target("avx512f"))) void second_pass512(const double* pr, const double* pk, std::size_t n, double mv,
                                                       double mr, double mk, TileSums& s) {
  const __m512d neg_inf = _mm512_set1_pd(-HUGE_VAL), vmv = _mm512_set1_pd(mv), vmr = _mm512_set1_pd(mr),
                vmk = _mm512_set1_pd(mk);
  __m512d qv = _mm512_setzero_pd(), qr = qv, qk = qv;
  double tr[kLanes], tk[kLanes];
  for (std::size_t t = 0; t < n; t += kLanes) {
    const bool tail = t + kLanes > n;
    if (tail) padded(pr + t, n - t, -HUGE_VAL, tr), padded(pk + t, n - t, mk, tk);
    const __m512d rr = _mm512_loadu_pd(tail ? tr : pr + t), kk = _mm512_loadu_pd(tail ? tk : pk + t);
    const __m512d v = _mm512_add_pd(rr, _mm512_add_pd(kk, kk));
    const __m512d dv = _mm512_sub_pd(v, vmv), dr = _mm512_sub_pd(_mm512_add_pd(rr, kk), vmr),
                  dk = _mm512_sub_pd(kk, vmk);
    const __mmask8 ok = _mm512_cmp_pd_mask(v, neg_inf, _CMP_NEQ_UQ);
    qv = _mm512_mask_add_pd(qv, ok, qv, _mm512_mul_pd(dv, dv));
    qr = _mm512_mask_add_pd(qr, ok, qr, _mm512_mul_pd(dr, dr));
    qk = _mm512_fmadd_pd(dk, dk, qk);
  }
  _mm512_storeu_pd(s.qv, qv), _mm512_storeu_pd(s.qr, qr), _mm512_storeu_pd(s.qk, qk);
}
#endif

void run_first_pass(const double* pr, const double* pk, std::size_t n, TileSums& s) {
#if defined(__x86_64__)
  if (simd::active() == simd::Isa::Avx512) return first_pass512(pr, pk, n, s);
#endif
  first_pass(pr, pk, n, s);
}

void run_second_pass(const double* pr, const double* pk, std::size_t n, double mv, double mr, double mk, TileSums& s) {
#if defined(__x86_64__)
  if (simd::active() == simd::Isa::Avx512) return second_pass512(pr, pk, n, mv, mr, mk, s);
#endif
  second_pass(pr, pk, n, mv, mr, mk, s);
}

// Throws naming the first pair whose log-variance is NaN or +inf.
void check_finite(const Estimator& e, const arma::mat& r, const arma::mat& lk, arma::uword i0, arma::uword j0) {
  const double *pr = r.memptr(), *pk = lk.memptr();
  for (std::size_t t = 0; t < r.n_elem; ++t) {
    const double v = pr[t] + 2 * pk[t];
    if (std::isnan(v) || v == HUGE_VAL)
      throw NumericalError(fmt::format("estimator '{}': log-variance is {} at pair (x_{}, y_{})", e.info().name, v,
                                       i0 + t % r.n_rows, j0 + t / r.n_rows));
  }
}

PairwiseSummary summarize_tile(const Estimator& e, const arma::mat& r, const arma::mat& lk, arma::uword i0,
                               arma::uword j0) {
  const std::size_t n = r.n_elem;
  const double *pr = r.memptr(), *pk = lk.memptr();
  TileSums s;
  run_first_pass(pr, pk, n, s);
  // A NaN or +inf log-variance makes its lane's sum NaN or +inf (finite logs are far too small to overflow it).
  if (!std::isfinite(total(s.sv))) check_finite(e, r, lk, i0, j0);
  const double ok_total = total(s.n_ok);
  const double mv = ok_total > 0 ? total(s.sv) / ok_total : 0, mr = ok_total > 0 ? total(s.sr) / ok_total : 0;
  const double mk = total(s.sk) / static_cast<double>(n);
  run_second_pass(pr, pk, n, mv, mr, mk, s);
  PairwiseSummary out;
  out.n_exact = static_cast<std::uint64_t>(static_cast<double>(n) - ok_total);
  if (ok_total > 0) {
    out.log_var = {ok_total, mv, total(s.qv)};
    out.log_rel_var = {ok_total, mr, total(s.qr)};
  }
  out.log_kernel = {static_cast<double>(n), mk, total(s.qk)};
  return out;
}

}  // namespace

PairwiseSummary summarize_exact_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                                         arma::uword block, arma::uword M) {
  SummaryOrError r = std::move(summarize_exact_variances({&e}, k, X, Y, block, {M}).front());
  if (r.error) std::rethrow_exception(r.error);
  return r.summary;
}

std::vector<SummaryOrError> summarize_exact_variances(const std::vector<const Estimator*>& es, const Kernel& k,
                                                      const arma::mat& X, const arma::mat& Y, arma::uword block,
                                                      const std::vector<arma::uword>& Ms) {
  require(Ms.size() == es.size(), "{} feature counts for {} estimators", Ms.size(), es.size());
  for (const Estimator* e : es) validate_pair(X, Y, e->dim());
  require(block > 0, "block size must be > 0, got 0");
  return map_fold_pair_blocks<std::vector<SummaryOrError>>(
      X, Y, block,
      [&](const arma::mat& Xb, const arma::mat& Yb, arma::uword i0, arma::uword j0) {
        const PairGram g(Xb, Yb);  // one Gram product for the variances and the kernel (where a family forms one)
        const arma::mat lk = log_kernel(k, g);
        std::vector<SummaryOrError> out(es.size());
        for (std::size_t i = 0; i < es.size(); ++i) {
          try {
            out[i].summary = summarize_tile(*es[i], es[i]->log_var_over_k2_m(g, Ms[i]), lk, i0, j0);
          } catch (...) {
            out[i].error = std::current_exception();
          }
        }
        return out;
      },
      [](std::vector<SummaryOrError>& acc, const std::vector<SummaryOrError>& tile) {
        for (std::size_t i = 0; i < acc.size(); ++i) {
          if (acc[i].error) continue;
          if (tile[i].error)
            acc[i] = {PairwiseSummary{}, tile[i].error};
          else
            acc[i].summary.merge(tile[i].summary);
        }
      },
      std::vector<SummaryOrError>(es.size()));
}

}  // namespace kestrel
