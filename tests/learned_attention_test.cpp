// Hedgehog maps fitted to a head's attention and judged on held-out sequences (issue 65): the hand-written gradient
// against finite differences, determinism over thread counts, the reported held-out error against an independent
// recomputation from the saved parameters, and a learned map beating positive random features on a sharp head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <oneapi/tbb/global_control.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "estimators/hedgehog/fit.hpp"
#include "estimators/hedgehog/hedgehog.hpp"
#include "sharp_head.hpp"
#include "tasks/attention.hpp"
#include "tasks/learned_attention.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

using test::kSigmas;

// n sequences of L tokens with iid N(0, scale^2) queries and keys and N(0, 1) values (d x L, d x L, L x dv).
HeadSequences random_head(arma::uword n, arma::uword L, arma::uword d, arma::uword dv, double scale,
                          std::uint64_t seed) {
  HeadSequences h;
  for (arma::uword s = 0; s < n; ++s) {
    Rng rng(seed, Stream::User, s);
    h.Q.push_back(scale * rng.normal_matrix(d, L));
    h.K.push_back(scale * rng.normal_matrix(d, L));
    h.V.push_back(rng.normal_matrix(L, dv));
  }
  return h;
}

// ---- independent references: plain loops over rows and keys, sharing nothing with the library's paths ----

// The keys query i attends to: 0..i when causal, else all.
arma::uword plain_keys(arma::uword i, const arma::mat& K, bool causal) { return causal ? i + 1 : K.n_cols; }

// Exact softmax attention, logits q^T k / sqrt(d): Lq x dv.
arma::mat plain_exact(const arma::mat& Q, const arma::mat& K, const arma::mat& V, bool causal = false) {
  const double c = 1.0 / std::sqrt(static_cast<double>(Q.n_rows));
  arma::mat Y(Q.n_cols, V.n_cols, arma::fill::zeros);
  std::vector<double> l(K.n_cols);
  for (arma::uword i = 0; i < Q.n_cols; ++i) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (arma::uword j = 0; j < plain_keys(i, K, causal); ++j) {
      double dot = 0;
      for (arma::uword t = 0; t < Q.n_rows; ++t) dot += Q(t, i) * K(t, j);
      l[j] = c * dot, m = std::max(m, l[j]);
    }
    for (arma::uword j = 0; j < plain_keys(i, K, causal); ++j) {
      const double w = std::exp(l[j] - m);
      sum += w;
      for (arma::uword v = 0; v < V.n_cols; ++v) Y(i, v) += w * V(j, v);
    }
    for (arma::uword v = 0; v < V.n_cols; ++v) Y(i, v) /= sum;
  }
  return Y;
}

// z_p(x) = w_p^T x / d^(1/4) + b_p for one point.
std::vector<double> plain_z(const arma::mat& W, const arma::vec& b, const double* x) {
  const double c = std::pow(static_cast<double>(W.n_cols), -0.25);
  std::vector<double> z(W.n_rows);
  for (arma::uword p = 0; p < W.n_rows; ++p) {
    z[p] = b[p];
    for (arma::uword t = 0; t < W.n_cols; ++t) z[p] += W(p, t) * c * x[t];
  }
  return z;
}

// S_ij = sum_p exp(z_p(q_i) + z_p(k_j)) + exp(-z_p(q_i) - z_p(k_j)), unstabilised: Lq x Lk.
arma::mat plain_scores(const arma::mat& W, const arma::vec& b, const arma::mat& Q, const arma::mat& K) {
  arma::mat S(Q.n_cols, K.n_cols, arma::fill::zeros);
  for (arma::uword i = 0; i < Q.n_cols; ++i) {
    const std::vector<double> zq = plain_z(W, b, Q.colptr(i));
    for (arma::uword j = 0; j < K.n_cols; ++j) {
      const std::vector<double> zk = plain_z(W, b, K.colptr(j));
      for (std::size_t p = 0; p < zq.size(); ++p) S(i, j) += std::exp(zq[p] + zk[p]) + std::exp(-zq[p] - zk[p]);
    }
  }
  return S;
}

// The map's attention Y-hat_i = sum_j S_ij v_j / sum_j S_ij.
arma::mat plain_map_attention(const arma::mat& W, const arma::vec& b, const arma::mat& Q, const arma::mat& K,
                              const arma::mat& V, bool causal) {
  const arma::mat S = plain_scores(W, b, Q, K);
  arma::mat Y(Q.n_cols, V.n_cols, arma::fill::zeros);
  for (arma::uword i = 0; i < Q.n_cols; ++i) {
    double sum = 0;
    for (arma::uword j = 0; j < plain_keys(i, K, causal); ++j) {
      sum += S(i, j);
      for (arma::uword v = 0; v < V.n_cols; ++v) Y(i, v) += S(i, j) * V(j, v);
    }
    for (arma::uword v = 0; v < V.n_cols; ++v) Y(i, v) /= sum;
  }
  return Y;
}

// The q-quantile with linear interpolation between order statistics.
double plain_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// Row errors |Y-hat_i - Y_i| / RMS |Y| over the rows of the sequences `which`, concatenated in order.
std::vector<double> plain_row_errors(const HedgehogParams& p, const HeadSequences& h, const arma::uvec& which) {
  std::vector<double> sq;
  double total = 0;
  for (const arma::uword s : which) {
    const arma::mat Y = plain_exact(h.Q[s], h.K[s], h.V[s], h.causal);
    const arma::mat Yh = plain_map_attention(p.W, p.b, h.Q[s], h.K[s], h.V[s], h.causal);
    for (arma::uword i = 0; i < Y.n_rows; ++i) {
      double e = 0;
      for (arma::uword v = 0; v < Y.n_cols; ++v)
        e += (Yh(i, v) - Y(i, v)) * (Yh(i, v) - Y(i, v)), total += Y(i, v) * Y(i, v);
      sq.push_back(e);
    }
  }
  const double rms = std::sqrt(total / static_cast<double>(sq.size()));
  for (double& e : sq) e = std::sqrt(e) / rms;
  return sq;
}

// The cross-entropy of fit.hpp by plain loops from the scores: (1/N) sum_i sum_j -A_ij log(S_ij / sum_j S_ij), the
// sums over the keys row i attends to (causal: rows[i] is query i's position, keys 0..rows[i]).
double plain_cross_entropy(const HedgehogParams& p, const arma::mat& Q, const arma::mat& K, const arma::uvec& rows,
                           bool causal) {
  const arma::mat S = plain_scores(p.W, p.b, Q.cols(rows), K);
  const arma::mat I = arma::eye(K.n_cols, K.n_cols);
  const arma::mat A = plain_exact(Q, K, I, causal);  // the attention matrix itself: values = identity
  double out = 0;
  for (arma::uword r = 0; r < rows.n_elem; ++r) {
    const arma::uword i = rows[r], n = plain_keys(i, K, causal);
    double sum = 0;
    for (arma::uword j = 0; j < n; ++j) sum += S(r, j);
    for (arma::uword j = 0; j < n; ++j) out -= A(i, j) * std::log(S(r, j) / sum);
  }
  return out / static_cast<double>(rows.n_elem);
}

HedgehogParams perturbed_params(arma::uword d, arma::uword M, std::uint64_t seed) {
  HedgehogParams p = hedgehog_init(d, M, seed);
  Rng rng(seed, Stream::User, 99);
  p.W *= 0.7;
  for (double& x : p.b) x = 0.3 * rng.normal();
  return p;
}

// Entries where central differences (step h) and the gradient disagree by more than tol.
int fd_mismatches(const HedgehogParams& p, const std::vector<AttentionRows>& data, const HedgehogParams& g, double tol,
                  bool report, double* worst = nullptr) {
  const double h = 1e-5;
  int bad = 0;
  for (arma::uword k = 0; k < p.P() * (p.d() + 1); ++k) {
    HedgehogParams lo = p, hi = p;
    double& xl = k < p.P() * p.d() ? lo.W(k / p.d(), k % p.d()) : lo.b(k - p.P() * p.d());
    double& xh = k < p.P() * p.d() ? hi.W(k / p.d(), k % p.d()) : hi.b(k - p.P() * p.d());
    xl -= h, xh += h;
    const double fd = (attention_cross_entropy(hi, data) - attention_cross_entropy(lo, data)) / (2 * h);
    const double an = k < p.P() * p.d() ? g.W(k / p.d(), k % p.d()) : g.b(k - p.P() * p.d());
    if (worst) *worst = std::max(*worst, std::abs(fd - an));
    if (std::abs(fd - an) > tol) {
      ++bad;
      if (report) ADD_FAILURE() << "parameter " << k << ": gradient " << an << ", finite differences " << fd;
    }
  }
  return bad;
}

// The gradient against central differences with h = 1e-5: their error is h^2 |L'''| / 6 + eps |L| / h, about 1e-10
// here (L = 2.06; measured: at most 6e-11 over the 15 entries); the tolerance 1e-7 is 1700x that and 1e-6 of the
// largest entry (0.14; asserted > 1e-2, so the check is not vacuous), so a dropped key-side or query-side term, a sign
// or a wrong 1/N cannot pass; the negative control shows that a 1% error in the gradient fails it. The value is also
// checked against a plain loop over S_ij (1e-12 relative: rounding only). Bidirectional and causal (the mask on both
// A and A-hat: a map normalised over every key, or A's mask alone, would differ from the plain loop).
TEST(LearnedAttention, GradientMatchesFiniteDifferences) {
  const HeadSequences h = random_head(2, 9, 4, 1, 1.2, 5);
  const arma::uvec all = arma::regspace<arma::uvec>(0, 8), some{0, 2, 5};
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const std::vector<AttentionRows> data{attention_rows(h.Q[0], h.K[0], {}, causal),
                                          attention_rows(h.Q[1], h.K[1], some, causal)};
    const HedgehogParams p = perturbed_params(4, 6, 21);
    HedgehogParams g;
    const double f = attention_cross_entropy(p, data, &g);
    EXPECT_NEAR(f, attention_cross_entropy(p, data), 1e-14 * f);
    const double plain = (9 * plain_cross_entropy(p, h.Q[0], h.K[0], all, causal) +
                          3 * plain_cross_entropy(p, h.Q[1], h.K[1], some, causal)) /
                         12;
    EXPECT_NEAR(f, plain, 1e-12 * f);
    const double gmax = std::max(arma::abs(g.W).max(), arma::abs(g.b).max());
    ASSERT_GT(gmax, 1e-2) << "the check would be vacuous";
    double worst = 0;
    EXPECT_EQ(fd_mismatches(p, data, g, 1e-7, true, &worst), 0);
    std::cout << (causal ? "causal" : "bidirectional") << ": objective " << f << ", largest gradient entry " << gmax
              << ", largest |FD - gradient| " << worst << "\n";
    HedgehogParams wrong = g;
    wrong.W *= 1.01, wrong.b *= 1.01;
    EXPECT_GT(fd_mismatches(p, data, wrong, 1e-7, false), 0) << "negative control";
  }
}

TEST(LearnedAttention, FitLowersTheObjectiveAndWarmStartsKeepRows) {
  const HeadSequences h = random_head(2, 24, 6, 2, 1.0, 8);
  const std::vector<AttentionRows> data{attention_rows(h.Q[0], h.K[0]), attention_rows(h.Q[1], h.K[1])};
  const HedgehogFit fit = fit_hedgehog(hedgehog_init(6, 8, 3), data, {.iterations = 30});
  EXPECT_LT(fit.final_objective, fit.initial_objective);
  EXPECT_GT(fit.iterations, 0u);
  const HedgehogParams big = hedgehog_extend(fit.params, 12, 3), fresh = hedgehog_init(6, 12, 3);
  EXPECT_TRUE(arma::all(arma::vectorise(big.W.rows(0, 3) == fit.params.W)));
  EXPECT_TRUE(arma::all(big.b.head(4) == fit.params.b));
  EXPECT_TRUE(arma::all(arma::vectorise(big.W.rows(4, 5) == fresh.W.rows(4, 5))));
  EXPECT_TRUE(arma::all(big.b.tail(2) == 0.0));
  const HedgehogParams back = hedgehog_params_from_json(to_json(fit.params));
  EXPECT_TRUE(arma::all(arma::vectorise(back.W == fit.params.W)) && arma::all(back.b == fit.params.b));
  const auto named = named_parameters(fit.params);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].name, "W");
  EXPECT_EQ(named[0].shape, (std::vector<arma::uword>{4, 6}));
  EXPECT_EQ(named[0].values[1], fit.params.W(0, 1));  // row-major
  EXPECT_EQ(named[1].shape, (std::vector<arma::uword>{4}));
}

LearnedCurveOptions small_options() {
  return {.features = {4, 8}, .held_out = 2, .fit_seeds = 3, .max_fit_rows = 20, .seed = 7, .fit = {.iterations = 15}};
}

void expect_same(const std::vector<LearnedCurvePoint>& a, const std::vector<LearnedCurvePoint>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].held_out_mean, b[k].held_out_mean) << "M = " << a[k].M;
    EXPECT_EQ(a[k].held_out_se, b[k].held_out_se) << "M = " << a[k].M;
    for (std::size_t s = 0; s < a[k].fits.size(); ++s) {
      const auto &x = a[k].fits[s], &y = b[k].fits[s];
      EXPECT_TRUE(arma::all(arma::vectorise(x.fit.params.W == y.fit.params.W))) << "M = " << a[k].M << " fit " << s;
      EXPECT_TRUE(arma::all(x.fit.params.b == y.fit.params.b));
      EXPECT_TRUE(arma::all(x.held_out.errors == y.held_out.errors));
      EXPECT_TRUE(arma::all(x.train.errors == y.train.errors));
      EXPECT_TRUE(arma::all(x.held_out_sequences == y.held_out_sequences));
    }
  }
}

// Sequences of 300 rows, all fitted: the objective's row blocks of 256 (parallel) are exercised as well as the seeds.
TEST(LearnedAttention, CurveIsDeterministicForAnyThreadCount) {
  const HeadSequences h = random_head(5, 300, 8, 3, 1.0, 11);
  LearnedCurveOptions opt = small_options();
  opt.max_fit_rows = 0;
  std::vector<LearnedCurvePoint> one, two;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    one = learned_attention_curve(h, opt);
  }
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    two = learned_attention_curve(h, opt);
  }
  expect_same(one, two);
  expect_same(one, learned_attention_curve(h, opt));
  // The splits differ between fits (what the SE over seeds is about) and the parts are disjoint and complete.
  const auto& f = one[0].fits;
  EXPECT_FALSE(arma::all(f[0].held_out_sequences == f[1].held_out_sequences) &&
               arma::all(f[0].held_out_sequences == f[2].held_out_sequences));
  for (const auto& r : f) {
    EXPECT_EQ(r.held_out_sequences.n_elem, 2u);
    EXPECT_EQ(arma::accu(arma::join_cols(r.held_out_sequences, r.train_sequences)), 0u + 1 + 2 + 3 + 4);
  }
}

// The reported held-out and training errors recomputed from the saved W and b by plain loops (plain_* above: exact
// softmax attention and the map's unstabilised attention S V / S 1, no library code but the quantile's definition):
// equal within 1e-10 relative (the library's path is stabilised and uses BLAS, so the two differ by rounding only).
// Bidirectional and causal (prefix sums against a loop over the keys up to each position).
TEST(LearnedAttention, HeldOutErrorEqualsAnIndependentRecomputation) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    HeadSequences h = random_head(5, 40, 8, 3, 1.1, 12);
    h.causal = causal;
    const auto curve = learned_attention_curve(h, small_options());
    for (const auto& c : curve)
      for (const auto& r : c.fits) {
        for (const auto* part : {&r.held_out, &r.train}) {
          const arma::uvec& which = part == &r.held_out ? r.held_out_sequences : r.train_sequences;
          const std::vector<double> e = plain_row_errors(r.fit.params, h, which);
          ASSERT_EQ(e.size(), part->errors.n_elem);
          // + 1e-14: a causal row 0 attends to one key, its error is 0 up to rounding
          for (std::size_t i = 0; i < e.size(); ++i)
            EXPECT_NEAR(part->errors[i], e[i], 1e-10 * e[i] + 1e-14) << "row " << i;
          const double q = plain_quantile(e, 0.95);
          EXPECT_NEAR(part->quantile, q, 1e-10 * q) << "M = " << c.M;
        }
      }
    // The public judgement of a saved map gives the same numbers.
    const auto& r = curve[1].fits[0];
    EXPECT_EQ(learned_row_errors(r.fit.params, h, r.held_out_sequences).quantile, r.held_out.quantile);
  }
}

// Positive random features (registry "pos", iid draws) on the same rows: per row the rmse over R draws,
// sqrt(mean_r |Y-hat_i^(r) - Y_i|^2) / RMS |Y|, and the p95 over the rows with two SEs: Monte Carlo (the SD of the p95
// over 200 bootstrap resamples of the R draws, all rows resampled together) and the order-statistic SE over rows.
struct PosRfP95 {
  double p95, mc_se, order_se;
  double se() const { return std::hypot(mc_se, order_se); }
};
PosRfP95 posrf_p95(const HeadSequences& h, const arma::uvec& which, arma::uword M, arma::uword R) {
  arma::mat sq;  // rows x R: squared row errors per draw
  double total = 0;
  for (const arma::uword s : which) {
    const arma::mat Y = exact_attention(h.Q[s], h.K[s], h.V[s]).Y;
    total += arma::accu(arma::square(Y));
    const auto e = fit_attention_estimator("pos", h.Q[s], h.K[s]);
    arma::mat part(Y.n_rows, R);
    for (arma::uword r = 0; r < R; ++r) {
      Rng rng(31, Stream::MonteCarlo, s * 1000 + r);
      const ApproxAttention approx = approximate_attention(*e, e->draw(M, rng, Sampler::Iid), h.Q[s], h.K[s], h.V[s]);
      part.col(r) = arma::sum(arma::square(approx.Y - Y), 1);
    }
    sq = arma::join_cols(sq, part);
  }
  const double rms = std::sqrt(total / static_cast<double>(sq.n_rows));
  const arma::vec err = arma::sqrt(arma::mean(sq, 1)) / rms;
  const arma::uword B = 200;
  arma::vec boot(B);
  for (arma::uword b = 0; b < B; ++b) {
    Rng rng(41, Stream::MonteCarlo, b);
    arma::vec m(sq.n_rows, arma::fill::zeros);
    for (arma::uword r = 0; r < R; ++r) m += sq.col(std::min<arma::uword>(rng.uniform() * R, R - 1));
    boot[b] = row_quantile(arma::sqrt(m / R) / rms, 0.95);
  }
  return {row_quantile(err, 0.95), arma::stddev(boot), row_quantile_se(err, 0.95)};
}

// The point of issue 65: on a sharp head (sharp_head: logits 6 on a query's own direction, 0 elsewhere) a learned map
// of M = 64 features, fitted on 4 sequences of L = 192 and judged on the 2 others (384 rows), has a held-out p95 row
// error far below what PosRF reaches at the same M. PosRF: R = 32 draws per sequence; its p95's SE combines the
// bootstrap SE over the draws and the order-statistic SE over rows (the learned map's SE is the order-statistic one).
// Asserted: learned + 4.5 SE < PosRF - 4.5 SE, i.e. an observed gap above 4.5 (SE_learned + SE_PosRF), and the mean
// over the 2 fit seeds below half of PosRF's p95. Measured (seeds 2024, 3, 31): learned 0.408 +- 0.015 (train 0.358,
// mean over seeds 0.384 +- 0.024), PosRF 1.254 +- 0.054 (bootstrap 0.044, rows 0.030); at M = 16 0.457 against 1.329.
// The gap 0.846 is 15 combined SE; the test fails only if an estimate moves by the 0.54 above its 0.31 threshold, 9.6
// combined SE (a false-failure rate far below 1e-6 for near-normal estimates). PosRF's row errors are bounded (Y-hat is
// a convex combination of V's rows), so its bootstrap over 32 draws is not fooled by an unbounded tail.
TEST(LearnedAttention, LearnedMapBeatsPositiveRandomFeaturesOnASharpHead) {
  const arma::uword L = 192, R = 32;
  const HeadSequences h = test::sharp_head(6, L, 2024);
  const LearnedCurveOptions opt{
      .features = {16, 64}, .held_out = 2, .fit_seeds = 2, .seed = 3, .fit = {.iterations = 100}};
  const auto curve = learned_attention_curve(h, opt);
  const LearnedFitResult& fit = curve[1].fits[0];
  const PosRfP95 pos = posrf_p95(h, fit.held_out_sequences, 64, R), pos16 = posrf_p95(h, fit.held_out_sequences, 16, R);
  std::cout << "sharp head, L = " << L << ", M = 64: learned held-out p95 " << fit.held_out.quantile << " +- "
            << fit.held_out.quantile_se << " (train " << fit.train.quantile << "; mean over " << opt.fit_seeds
            << " seeds " << curve[1].held_out_mean << " +- " << curve[1].held_out_se << "), PosRF " << pos.p95 << " +- "
            << pos.se() << " (Monte Carlo " << pos.mc_se << ", rows " << pos.order_se << "); M = 16: learned "
            << curve[0].fits[0].held_out.quantile << ", PosRF " << pos16.p95 << " +- " << pos16.se()
            << "; fit iterations " << fit.fit.iterations << " (" << fit.fit.termination << ")\n";
  EXPECT_LT(fit.held_out.quantile + kSigmas * fit.held_out.quantile_se, pos.p95 - kSigmas * pos.se());
  EXPECT_LT(curve[1].held_out_mean, 0.5 * pos.p95);
}

TEST(LearnedAttention, BadInputsThrowNamingTheValue) {
  const HeadSequences h = random_head(3, 8, 4, 2, 1.0, 1);
  auto throws = [](auto&& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming '" << what << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  throws([] { hedgehog_init(4, 5, 1); }, "M = 5");
  throws([] { hedgehog_init(0, 4, 1); }, "d must be > 0");
  throws([] { hedgehog_extend(hedgehog_init(4, 8, 1), 4, 1); }, "M = 4");
  throws([] { validate(HedgehogParams{arma::mat(2, 3, arma::fill::ones), arma::vec(3)}); }, "b has 3");
  throws(
      [] {
        (void)HedgehogMap(HedgehogParams{arma::mat(2, 3, arma::fill::value(arma::datum::nan)), arma::vec(2)});
      },
      "finite");
  throws([] { hedgehog_params_from_json(nlohmann::json::parse(R"({"P": 1, "d": 2, "W": [[1.0]], "b": [0.0]})")); },
         "row 0 of W");
  throws([] { attention_cross_entropy(hedgehog_init(4, 4, 1), {}); }, "no training sequences");
  throws([&] { attention_cross_entropy(hedgehog_init(3, 4, 1), {attention_rows(h.Q[0], h.K[0])}); }, "dimension 4");
  throws([&] { attention_rows(h.Q[0], h.K[0], {8}); }, "row 8");
  throws([&] { attention_rows(h.Q[0], h.K[0].cols(0, 6), {}, true); }, "8 queries but 7 keys");
  throws([&] { fit_hedgehog(hedgehog_init(4, 4, 1), {attention_rows(h.Q[0], h.K[0])}, {.gradient_tolerance = -1}); },
         "-1");
  throws([&] { learned_attention_curve(HeadSequences{{h.Q[0]}, {h.K[0]}, {h.V[0]}}); }, "got 1");
  throws([&] { learned_attention_curve(h, {.features = {4, 7}}); }, "M = 7");
  throws([&] { learned_attention_curve(h, {.features = {8, 4}}); }, "4 after 8");
  throws([&] { learned_attention_curve(h, {.held_out = 3}); }, "held_out = 3");
  throws([&] { learned_attention_curve(h, {.fit_seeds = 0}); }, "fit_seeds");
  throws([&] { learned_attention_curve(h, {.quantile = 1}); }, "quantile");
  HeadSequences bad = h;
  bad.Q[1](0, 0) = arma::datum::nan;
  throws([&] { learned_attention_curve(bad); }, "queries");
  bad = h;
  bad.V[2] = arma::mat(7, 2);
  throws([&] { learned_attention_curve(bad); }, "got 7");
  bad = h;
  bad.V[2] = arma::mat(8, 3, arma::fill::ones);
  throws([&] { learned_attention_curve(bad); }, "dv = 3");
  throws([&] { learned_row_errors(hedgehog_init(4, 4, 1), h, {3}); }, "got 3");
  throws([&] { learned_row_errors(hedgehog_init(5, 4, 1), h, {0}); }, "d = 5");
}

}  // namespace
}  // namespace kestrel
