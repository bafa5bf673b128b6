// Exact covariance of the rows of K-hat C from a three-point form (operator_variance.hpp has the derivation).
#include "analysis/operator_variance.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <utility>
#include <vector>

#include <tbb/task_arena.h>

#include "analysis/row_sample.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"

namespace kestrel {

namespace {

using cx = std::complex<double>;
constexpr arma::uword kQueryBlock = 512;  // rows per parallel block: G tiles are recomputed once per block
constexpr arma::uword kKeyTile = 256;     // keys per tile of G (memory O(kKeyTile^2))

double re(double v) { return v; }
double re(cx v) { return v.real(); }
double conj_t(double v) { return v; }
cx conj_t(cx v) { return std::conj(v); }
template <typename T>
T coef(cx c) {
  if constexpr (std::is_same_v<T, double>)
    return c.real();
  else
    return c;
}

// expm1 of a complex number without cancellation near 0: e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y/2).
cx expm1_c(cx z) {
  if (std::abs(z) > 0.5) return std::exp(z) - 1.0;
  const double s = std::sin(0.5 * z.imag());
  return {std::expm1(z.real()) * std::cos(z.imag()) - 2 * s * s, std::exp(z.real()) * std::sin(z.imag())};
}

// x^T M x per column (M empty: the identity), and M X.
arma::rowvec quad(const arma::mat& M, const arma::mat& X) {
  return M.is_empty() ? arma::rowvec(arma::sum(arma::square(X), 0)) : arma::rowvec(arma::sum((M * X) % X, 0));
}
arma::mat apply(const arma::mat& M, const arma::mat& X) { return M.is_empty() ? X : arma::mat(M * X); }

// The G tile of the header at h = (nu_j + nu_k)/2 >= |Re Gamma|: e^{-h} expm1(Gamma) (split) or e^{Gamma - h}, for a
// real tile through the vectorised exp/expm1: expm1(Gamma) e^{-h} where Gamma is small (no cancellation),
// e^{Gamma-h} - e^{-h} elsewhere (no overflow).
void scaled_tile(arma::mat& G, const arma::rowvec& nu_j, const arma::rowvec& nu_k, bool split) {
  arma::mat H(G.n_rows, G.n_cols);
  for (arma::uword c = 0; c < G.n_cols; ++c)
    for (arma::uword r = 0; r < G.n_rows; ++r) H(r, c) = -0.5 * (nu_j[r] + nu_k[c]);
  arma::mat big = G + H;
  simd::exp(big);
  if (!split) {
    G = std::move(big);
    return;
  }
  arma::mat eh = H, small = G;
  simd::exp(eh);
  simd::expm1(small.memptr(), small.n_elem);
  for (arma::uword i = 0; i < G.n_elem; ++i) G[i] = G[i] > 0.5 ? big[i] - eh[i] : small[i] * eh[i];
}
void scaled_tile(arma::cx_mat& G, const arma::rowvec& nu_j, const arma::rowvec& nu_k, bool split) {
  for (arma::uword c = 0; c < G.n_cols; ++c)
    for (arma::uword r = 0; r < G.n_rows; ++r) {
      const double h = 0.5 * (nu_j[r] + nu_k[c]);
      const cx g = G(r, c);
      G(r, c) = !split ? std::exp(g - h) : g.real() > 0.5 ? std::exp(g - h) - std::exp(-h) : expm1_c(g) * std::exp(-h);
    }
}

// One term's per-key data.
struct KeySide {
  arma::mat MxyY, MyyY;  // Mxy Y, Myy Y (d x Ly)
  arma::rowvec qy, ny;   // y^T My y, y^T Myy y
};

// The split form (operator_variance.hpp) is used where every |Gamma_jk| <= kSplitMaxGamma: there its parts are no
// larger than the second moment itself, and tiny variances come out of expm1 terms. Where |Gamma| is large (large
// inputs) its two parts would be huge and cancel (TrigRF at |y|^2 = 55: e^165 against a variance of e^110), and the
// second moment sum_jk w_ja w_kb e^{E_jk} minus (KC)_a (KC)_b is evaluated instead: there the variance is not tiny
// against K^2 except at special configurations (every key near -x for PosRF), where digits are lost.
constexpr double kSplitMaxGamma = 1.0;

// Row-block results of one term: P1_ab = z_a^T G z'_b (scaled), delta_a (split only), the scales
// (operator_variance.hpp), and whether the split form was used.
template <typename T>
struct TermRows {
  bool split = true;
  arma::Col<T> alpha;
  arma::vec m, m2;
  arma::Mat<T> delta;     // b x n
  arma::Cube<T> P1;       // b x n x n (full mode)
  arma::Mat<T> P1_last;   // b x n: P1_{last,a} (ratio mode)
  arma::Col<T> P1_trace;  // b: sum_{a < last} P1_aa (ratio mode)
};

// The scales of a block's rows (operator_variance.hpp): m for z (kappa + Re beta + nu/2) and m2 for delta
// (kappa + max(0, Re(alpha/2 + beta))).
template <typename T>
void row_scales(TermRows<T>& r, const arma::Mat<T>& beta, const arma::mat& kappa, const arma::rowvec& nu) {
  const arma::uword b = beta.n_rows, Ly = beta.n_cols;
  r.m.set_size(b);
  r.m2.set_size(b);
  for (arma::uword i = 0; i < b; ++i) {
    double m = -kInf, m2 = -kInf;
    for (arma::uword j = 0; j < Ly; ++j) {
      m = std::max(m, kappa(i, j) + re(beta(i, j)) + 0.5 * nu[j]);
      m2 = std::max(m2, kappa(i, j) + std::max(0.0, re(0.5 * r.alpha[i] + beta(i, j))));
    }
    r.m[i] = m;
    r.m2[i] = m2;
  }
}

// delta_a = sum_j C_ja e^{kappa - m2} expm1(alpha/2 + beta_j), accumulated over key tiles (no b x Ly temporary), and
// beta overwritten by z = e^{kappa + beta + nu/2 - m}: memory O(b Ly) for the block, once.
template <typename T>
void z_and_delta(TermRows<T>& r, arma::Mat<T>& beta, const arma::mat& kappa, const arma::rowvec& nu,
                 const arma::mat& C) {
  const arma::uword b = beta.n_rows, Ly = beta.n_cols;
  r.delta.zeros(b, C.n_cols);
  for (arma::uword j0 = 0; j0 < Ly; j0 += kKeyTile) {
    const arma::uword j1 = std::min(Ly, j0 + kKeyTile);
    arma::Mat<T> D(b, j1 - j0);
    for (arma::uword j = j0; j < j1; ++j)
      for (arma::uword i = 0; i < b; ++i) {
        const T e = 0.5 * r.alpha[i] + beta(i, j);
        const double s = kappa(i, j) - r.m2[i];
        if constexpr (std::is_same_v<T, double>)
          D(i, j - j0) = e > 0.5 ? std::exp(s + e) - std::exp(s) : std::exp(s) * std::expm1(e);
        else
          D(i, j - j0) = e.real() > 0.5 ? std::exp(s + e) - std::exp(s) : std::exp(s) * expm1_c(e);
        beta(i, j) = std::exp(kappa(i, j) + beta(i, j) + 0.5 * nu[j] - r.m[i]);
      }
    r.delta += D * arma::conv_to<arma::Mat<T>>::from(C.rows(j0, j1 - 1));
  }
}

// Calls part(K) for every key tile K, kTileWave tiles at a time in parallel, and fold(part) in tile order: the same
// sums as a serial loop over K, for any thread count, with at most kTileWave parts in memory. Isolated, so a thread
// waiting here does not pick up another row block (whose b x Ly matrices would then be alive at the same time).
constexpr arma::uword kTileWave = 4;
template <typename Part, typename PartFn, typename Fold>
void fold_key_tiles(arma::uword tiles, PartFn&& part, Fold&& fold) {
  for (arma::uword w0 = 0; w0 < tiles; w0 += kTileWave) {
    std::vector<Part> parts(std::min(kTileWave, tiles - w0));
    tbb::this_task_arena::isolate(
        [&] { for_each_block(parts.size(), [&](std::size_t p) { parts[p] = part(w0 + p); }); });
    for (auto& p : parts) fold(p);
  }
}

// ratio: C's last column is 1 and only what the ratio rows need is formed (ratio_moments): P1_{last,a} from one
// product Z G and the trace sum_{a<last} z_a^T G z'_a = Z^T (G o H) Z', H = V V^T, from a second, whatever n is.
// Work per row O(Ly^2) (two products) in ratio mode and O(Ly^2 n) otherwise (one product per column of C); G and H
// tiles (O(Ly^2 d), O(Ly^2 n)) are shared by the block's rows. Memory O(b Ly + kTileWave b kKeyTile n): never Ly^2.
template <typename T>
TermRows<T> term_rows(const ThreePointTerm& t, const KeySide& ks, const arma::mat& Xb, const arma::mat& Y,
                      const arma::mat& C, const arma::mat& kappa, bool ratio) {
  using Mat = arma::Mat<T>;
  const arma::uword b = Xb.n_cols, Ly = Y.n_cols, n = C.n_cols;
  const T cxy = coef<T>(t.cxy), cy = coef<T>(t.cy), cyy = coef<T>(t.cyy);
  const arma::rowvec nu = std::abs(t.cyy) * ks.ny;
  TermRows<T> r;
  r.split = nu.max() <= kSplitMaxGamma;
  r.alpha = coef<T>(t.a0) + coef<T>(t.cx) * arma::conv_to<arma::Col<T>>::from(quad(t.Mx, Xb).t());
  Mat Z = cxy * arma::conv_to<Mat>::from(Xb.t() * ks.MxyY);  // beta until z_and_delta
  Z.each_row() += cy * arma::conv_to<arma::Row<T>>::from(ks.qy);
  row_scales(r, Z, kappa, nu);
  z_and_delta(r, Z, kappa, nu, C);

  // P1_ab = sum_{J,K} ((Z o C_a)_J G_JK) o (Z' o C_b)_K summed over the row, G_JK = e^{-h} expm1(Gamma_JK).
  const arma::uword tiles = (Ly + kKeyTile - 1) / kKeyTile;
  auto span = [&](arma::uword t_) { return arma::span(t_ * kKeyTile, std::min(Ly, (t_ + 1) * kKeyTile) - 1); };
  auto g_tile = [&](arma::uword J, arma::uword K) {
    Mat G = cyy * arma::conv_to<Mat>::from(Y.cols(span(J)).t() * ks.MyyY.cols(span(K)));
    scaled_tile(G, nu.cols(span(J)), nu.cols(span(K)), r.split);
    return G;
  };
  auto zp = [&](arma::uword K) { return t.hermitian ? Mat(arma::conj(Z.cols(span(K)))) : Mat(Z.cols(span(K))); };
  if (ratio) {
    const arma::uword last = n - 1;
    r.P1_last.zeros(b, n);
    r.P1_trace.zeros(b);
    using Part = std::pair<Mat, arma::Col<T>>;
    auto part = [&](arma::uword K) {
      const arma::uword w = span(K).b - span(K).a + 1;
      Mat Wl(b, w, arma::fill::zeros), Wt(b, w, arma::fill::zeros);
      for (arma::uword J = 0; J < tiles; ++J) {
        const Mat G = g_tile(J, K);
        Wl += Z.cols(span(J)) * G;  // C's last column is 1: Z o C_last = Z
        if (last > 0) {
          const arma::mat H =
              C.submat(span(J), arma::span(0, last - 1)) * C.submat(span(K), arma::span(0, last - 1)).t();
          Wt += Z.cols(span(J)) * Mat(G % arma::conv_to<Mat>::from(H));
        }
      }
      const Mat ZpK = zp(K);
      return Part(Mat(Wl % ZpK) * arma::conv_to<Mat>::from(C.rows(span(K))), arma::sum(Wt % ZpK, 1));
    };
    fold_key_tiles<Part>(tiles, part, [&](const Part& p) { r.P1_last += p.first, r.P1_trace += p.second; });
    return r;
  }
  r.P1.zeros(b, n, n);
  auto part = [&](arma::uword K) {
    std::vector<Mat> W(n, Mat(b, span(K).b - span(K).a + 1, arma::fill::zeros));
    for (arma::uword J = 0; J < tiles; ++J) {
      const Mat G = g_tile(J, K);
      for (arma::uword a = 0; a < n; ++a) {
        Mat Za = Z.cols(span(J));
        Za.each_row() %= arma::conv_to<arma::Row<T>>::from(arma::rowvec(C.submat(span(J), arma::span(a, a)).t()));
        W[a] += Za * G;
      }
    }
    arma::Cube<T> P(b, n, n);
    const Mat ZpK = zp(K);
    for (arma::uword c = 0; c < n; ++c) {
      Mat Zb = ZpK;
      Zb.each_row() %= arma::conv_to<arma::Row<T>>::from(arma::rowvec(C.submat(span(K), arma::span(c, c)).t()));
      for (arma::uword a = 0; a < n; ++a) P.slice(c).col(a) = arma::sum(W[a] % Zb, 1);
    }
    return P;
  };
  fold_key_tiles<arma::Cube<T>>(tiles, part, [&](const arma::Cube<T>& p) { r.P1 += p; });
  return r;
}

SignedLog signed_log(double log_scale, double v) {
  SignedLog s = SignedLog::from_value(v);
  if (s.sign) s.log_abs += log_scale;
  return s;
}

// The delta part of the split form for row i, columns (a, b): Re(delta_a u'_b + s_a delta'_b), u'_b = s_b + delta'_b
// (operator_variance.hpp), at scale m2 (s_a, s_b given at that scale).
template <typename T>
double delta_part(const TermRows<T>& r, const ThreePointTerm& t, arma::uword i, arma::uword a, arma::uword b,
                  double s_a, double s_b) {
  const T da = r.delta(i, a), db = t.hermitian ? conj_t(r.delta(i, b)) : r.delta(i, b);
  return re(da * (s_b + db) + s_a * db);
}

// The weight times Re sum_{j,k} w_ja w_kb (exp(E_jk) - 1) (split) or Re sum_{j,k} w_ja w_kb exp(E_jk) for one row,
// from its P1 entry and (split only) its delta part; sums of such entries (a trace) go through the same way.
template <typename T>
SignedLog term_excess(const TermRows<T>& r, const ThreePointTerm& t, arma::uword i, T p1, double v2) {
  const double lw = std::log(t.weight);
  // e^{alpha + 2m} P1: Re(e^{i Im alpha} P1) at scale Re alpha + 2m.
  double v1;
  if constexpr (std::is_same_v<T, double>)
    v1 = p1;
  else
    v1 = (std::exp(cx(0, r.alpha[i].imag())) * p1).real();
  SignedLog out = signed_log(re(r.alpha[i]) + 2 * r.m[i] + lw, v1);
  if (!r.split) return out;  // the weighted second moment; the caller subtracts (KC)_a (KC)_b
  return out + signed_log(2 * r.m2[i] + lw, v2);
}

void check_inputs(const arma::mat& X, const arma::mat& Y, const arma::mat& C, arma::uword M, const arma::uvec& rows) {
  validate_sets(X, Y);
  if (!rows.is_empty()) check_rows(rows, X.n_cols);
  require(C.n_rows == Y.n_cols && C.n_cols > 0, "C must be Ly x n with Ly = {} keys and n > 0, got {} x {}", Y.n_cols,
          C.n_rows, C.n_cols);
  require(C.is_finite(), "C must be finite (found NaN or Inf)");
  require(M > 0, "the number of features M must be > 0, got 0");
}

// One block of query rows: (KC)_ia = e^{m3_i} s_ia and every term's rows.
struct RowBlock {
  arma::uword i0 = 0, b = 0;
  arma::vec m3;
  arma::mat s;
  std::vector<TermRows<double>> real_rows;
  std::vector<TermRows<cx>> cx_rows;
};

// Calls body(block) for fixed blocks of query rows in parallel (each block writes its own rows).
template <typename Body>
void for_each_row_block(const ThreePointForm& form, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                        const arma::mat& C, bool ratio, Body&& body) {
  require(!form.terms.empty(), "three-point form without terms");
  std::vector<KeySide> keys;
  for (const auto& t : form.terms) {
    KeySide ks{
        apply(t.Mxy, Y), apply(t.Myy.is_empty() ? t.Myy : arma::mat(0.5 * (t.Myy + t.Myy.t())), Y), quad(t.My, Y), {}};
    ks.ny = arma::sum(ks.MyyY % Y, 0);
    keys.push_back(std::move(ks));
  }
  const arma::uword Lx = X.n_cols;
  for_each_block((Lx + kQueryBlock - 1) / kQueryBlock, [&](std::size_t blk) {
    RowBlock rb;
    rb.i0 = blk * kQueryBlock;
    const arma::mat Xb = X.cols(rb.i0, std::min(Lx, rb.i0 + kQueryBlock) - 1);
    rb.b = Xb.n_cols;
    const arma::mat kappa = log_kernel(k, Xb, Y);
    rb.m3 = arma::max(kappa, 1);
    {
      arma::mat E3 = kappa;
      E3.each_col() -= rb.m3;
      simd::exp(E3);
      rb.s = E3 * C;
    }
    rb.real_rows.resize(form.terms.size());
    rb.cx_rows.resize(form.terms.size());
    for (std::size_t t = 0; t < form.terms.size(); ++t) {
      if (form.terms[t].real())
        rb.real_rows[t] = term_rows<double>(form.terms[t], keys[t], Xb, Y, C, kappa, ratio);
      else
        rb.cx_rows[t] = term_rows<cx>(form.terms[t], keys[t], Xb, Y, C, kappa, ratio);
    }
    body(rb);
  });
}

// M times a covariance of row i (or a sum of them): every term's excess plus (sum of the split terms' weights - 1)
// times ss = sum (KC)_a (KC)_b at scale e^{2 m3}. part(rows, term, to_m2) gives a term's P1 entry and delta part
// (delta_part with s scaled by to_m2 = e^{m3 - m2}).
template <typename Part>
SignedLog row_moment(const ThreePointForm& form, const RowBlock& rb, arma::uword i, double ss, Part&& part) {
  double extra = -1;
  SignedLog v;
  auto add = [&](const auto& rows, const ThreePointTerm& term) {
    if (rows.split) extra += term.weight;
    const auto [p1, v2] = part(rows, term, std::exp(rb.m3[i] - rows.m2[i]));
    v = v + term_excess(rows, term, i, p1, v2);
  };
  for (std::size_t t = 0; t < form.terms.size(); ++t)
    form.terms[t].real() ? add(rb.real_rows[t], form.terms[t]) : add(rb.cx_rows[t], form.terms[t]);
  if (extra != 0) v = v + signed_log(2 * rb.m3[i] + std::log(std::abs(extra)), (extra < 0 ? -1 : 1) * ss);
  return v;
}

}  // namespace

arma::mat KcMoments::log_var() const {
  arma::mat out(log_abs_kc.n_rows, log_abs_kc.n_cols);
  for (arma::uword i = 0; i < out.n_rows; ++i)
    for (arma::uword a = 0; a < out.n_cols; ++a) out(i, a) = cov.sign(a, a, i) > 0 ? cov.log_abs(a, a, i) : -kInf;
  return out;
}

KcMoments kc_moments(const ThreePointForm& form, const Kernel& k, const arma::mat& X_all, const arma::mat& Y,
                     const arma::mat& C, arma::uword M, const arma::uvec& rows) {
  check_inputs(X_all, Y, C, M, rows);
  const arma::mat X_rows = rows.is_empty() ? arma::mat() : arma::mat(X_all.cols(rows));
  const arma::mat& X = rows.is_empty() ? X_all : X_rows;  // the sampled queries (no copy for all rows)
  const arma::uword Lx = X.n_cols, n = C.n_cols;
  const double log_m = std::log(static_cast<double>(M));
  KcMoments out;
  out.log_abs_kc.set_size(Lx, n);
  out.sign_kc.set_size(Lx, n);
  out.cov.log_abs.set_size(n, n, Lx);
  out.cov.sign.set_size(n, n, Lx);
  for_each_row_block(form, k, X, Y, C, false, [&](const RowBlock& rb) {
    for (arma::uword i = 0; i < rb.b; ++i) {
      for (arma::uword a = 0; a < n; ++a) {
        const SignedLog kc = signed_log(rb.m3[i], rb.s(i, a));
        out.log_abs_kc(rb.i0 + i, a) = kc.log_abs;
        out.sign_kc(rb.i0 + i, a) = kc.sign;
      }
      for (arma::uword a = 0; a < n; ++a)
        for (arma::uword c = 0; c < n; ++c) {
          SignedLog v = row_moment(form, rb, i, rb.s(i, a) * rb.s(i, c), [&](const auto& r, const auto& t, double to) {
            return std::pair(r.P1(i, a, c), delta_part(r, t, i, a, c, rb.s(i, a) * to, rb.s(i, c) * to));
          });
          if (a == c && v.sign < 0) v = {};  // a variance that rounds below 0 is 0 (an exact estimate)
          out.cov.log_abs(a, c, rb.i0 + i) = v.sign ? v.log_abs - log_m : -kInf;
          out.cov.sign(a, c, rb.i0 + i) = v.sign;
        }
    }
  });
  return out;
}

RatioMoments ratio_moments(const ThreePointForm& form, const Kernel& k, const arma::mat& X_all, const arma::mat& Y,
                           const arma::mat& V, arma::uword M, const arma::uvec& rows) {
  const arma::mat C = arma::join_rows(V, arma::ones(V.n_rows));
  check_inputs(X_all, Y, C, M, rows);
  const arma::mat X_rows = rows.is_empty() ? arma::mat() : arma::mat(X_all.cols(rows));
  const arma::mat& X = rows.is_empty() ? X_all : X_rows;  // the sampled queries (no copy for all rows)
  const arma::uword Lx = X.n_cols, n = C.n_cols, last = n - 1;
  const double log_m = std::log(static_cast<double>(M));
  RatioMoments out;
  out.log_abs_kc.set_size(Lx, n);
  out.sign_kc.set_size(Lx, n);
  out.log_abs_cov.set_size(Lx, n);
  out.sign_cov.set_size(Lx, n);
  out.log_trace.set_size(Lx);
  auto store = [&](SignedLog v, auto& log_abs, auto& sign) {
    log_abs = v.sign ? v.log_abs - log_m : -kInf;
    sign = v.sign;
  };
  for_each_row_block(form, k, X, Y, C, true, [&](const RowBlock& rb) {
    for (arma::uword i = 0; i < rb.b; ++i) {
      const arma::uword row = rb.i0 + i;
      for (arma::uword a = 0; a < n; ++a) {
        const SignedLog kc = signed_log(rb.m3[i], rb.s(i, a));
        out.log_abs_kc(row, a) = kc.log_abs;
        out.sign_kc(row, a) = kc.sign;
        SignedLog v = row_moment(form, rb, i, rb.s(i, last) * rb.s(i, a), [&](const auto& r, const auto& t, double to) {
          return std::pair(r.P1_last(i, a), delta_part(r, t, i, last, a, rb.s(i, last) * to, rb.s(i, a) * to));
        });
        if (a == last && v.sign < 0) v = {};
        store(v, out.log_abs_cov(row, a), out.sign_cov(row, a));
      }
      double ss = 0;
      for (arma::uword a = 0; a < last; ++a) ss += rb.s(i, a) * rb.s(i, a);
      SignedLog tr = row_moment(form, rb, i, ss, [&](const auto& r, const auto& t, double to) {
        double v2 = 0;
        for (arma::uword a = 0; a < last; ++a) v2 += delta_part(r, t, i, a, a, rb.s(i, a) * to, rb.s(i, a) * to);
        return std::pair(r.P1_trace(i), v2);
      });
      if (tr.sign < 0) tr = {};
      out.log_trace(row) = tr.sign ? tr.log_abs - log_m : -kInf;
    }
  });
  return out;
}

}  // namespace kestrel
