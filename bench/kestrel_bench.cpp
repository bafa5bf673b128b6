// kestrel benchmarks (issue #8): exact pairwise variance over all L x L pairs (CRT 5.1, DERF 5.1), parameter
// fitting from O(L d) / O(L d^2) statistics, feature maps P and the low-rank product P (S^T C), the Monte Carlo
// simulator, Nadaraya-Watson classification (CRT 5.2), and the machine's DGEMM rate. `--dump DIR` writes the data,
// fitted parameters and values that bench/numpy_peer.py recomputes, so the NumPy comparison is on identical work.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>

#include "analysis/montecarlo.hpp"
#include "analysis/operator_variance.hpp"
#include "analysis/pairwise.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "data/catalog.hpp"
#include "data/regimes.hpp"
#include "data/uci.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/registry.hpp"
#include "tasks/classification.hpp"

using namespace kestrel;

namespace {

constexpr double kSigma = 0.5;  // data scale: N(0, sigma^2 I), the middle of CRT Fig. 2's sigma grid
const Kernel kGauss = Kernel::gaussian();

// One set pair of the `normal` regime per (d, L), drawn once (seed 1, pair 0).
const SetPair& data(arma::uword d, arma::uword L) {
  static std::mutex mu;
  static std::map<std::pair<arma::uword, arma::uword>, SetPair> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({d, L});
  if (it == cache.end())
    it = cache
             .emplace(std::make_pair(d, L),
                      draw_regime({.name = "normal", .dim = d, .points = L, .sigma = kSigma, .seed = 1}))
             .first;
  return it->second;
}

// C(i, j) = cos(0.001 i + 0.1 j): a deterministic L x n matrix the NumPy peer rebuilds from the same formula.
arma::mat c_matrix(arma::uword L, arma::uword n) {
  arma::mat C(L, n);
  for (arma::uword j = 0; j < n; ++j)
    for (arma::uword i = 0; i < L; ++i) C(i, j) = std::cos(0.001 * i + 0.1 * j);
  return C;
}

Draw feature_draw(const Estimator& e, arma::uword M) {
  Rng rng(1, Stream::Features, 0);
  return e.draw(M, rng, Sampler::Iid);
}

// Item 1: all L x L pairs, streamed in 256 x 256 tiles (analysis/pairwise.hpp).
void pairwise(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1);
  const SetPair& p = data(d, L);
  const auto e = make_estimator(name, p.X, p.Y);
  for (auto _ : st) benchmark::DoNotOptimize(summarize_exact_variance(*e, kGauss, p.X, p.Y));
  st.counters["pairs_per_s"] = benchmark::Counter(double(L) * L, benchmark::Counter::kIsIterationInvariantRate);
}

// Issue #19's floor for the pairwise variance: over the same 256 x 256 tiles on the same threads, only one Gram
// product X^T Y per tile, two vectorised transcendentals per pair (exp, then log of it: libmvec, as the GERF family's
// log(e^S - 1) is expm1 and log) and one pass summing them. What no exact pairwise variance can do without.
void pairwise_floor(benchmark::State& st) {
  const arma::uword L = st.range(0), d = st.range(1);
  const SetPair& p = data(d, L);
  auto tile = [](const arma::mat& Xb, const arma::mat& Yb, arma::uword, arma::uword) {
    arma::mat G = Xb.t() * Yb;
    simd::exp(G);
    simd::log(G);
    return arma::accu(G);
  };
  for (auto _ : st)
    benchmark::DoNotOptimize(map_fold_pair_blocks<double>(
        p.X, p.Y, 256, tile, [](double& acc, double v) { acc += v; }, 0.0));
  st.counters["pairs_per_s"] = benchmark::Counter(double(L) * L, benchmark::Counter::kIsIterationInvariantRate);
}

// Item 2: parameter fitting on a pair of sets (the registry's factories).
void fit(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1);
  const SetPair& p = data(d, L);
  for (auto _ : st) benchmark::DoNotOptimize(make_estimator(name, p.X, p.Y));
}

// Item 3: P (L x M) for one side; flops counted: the projection X^T W, 2 L d M.
void feature_map_bench(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1), M = st.range(2);
  const SetPair& p = data(d, L);
  const auto e = make_estimator(name, p.X, p.Y);
  const Draw w = feature_draw(*e, M);
  for (auto _ : st) benchmark::DoNotOptimize(feature_map(*e, w, p.X, Side::Query, kGauss));
  st.counters["GFLOPs"] = benchmark::Counter(2.0 * L * d * M * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Item 3: P (S^T C), C L x n; flops: two projections 2 * 2 L d M and two products 2 * 2 L Mc n (Mc = feature
// columns, 2M for complex estimators).
void kernel_times_rf(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1), M = st.range(2), n = st.range(3);
  const SetPair& p = data(d, L);
  const auto e = make_estimator(name, p.X, p.Y);
  const Draw w = feature_draw(*e, M);
  const arma::mat C = c_matrix(L, n);
  const double mc = e->info().complex ? 2.0 * M : double(M);
  for (auto _ : st) benchmark::DoNotOptimize(approximate_kernel_times(*e, w, p.X, p.Y, C, kGauss));
  st.counters["GFLOPs"] =
      benchmark::Counter((4.0 * L * d * M + 4.0 * L * mc * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Exact K C in O(L^2 (d + n)) (kernels/kernel.hpp), the baseline the features replace.
void kernel_times_exact(benchmark::State& st) {
  const arma::uword L = st.range(0), d = st.range(1), n = st.range(2);
  const SetPair& p = data(d, L);
  const arma::mat C = c_matrix(L, n);
  for (auto _ : st) benchmark::DoNotOptimize(kernel_times(kGauss, p.X, p.Y, C));
  st.counters["GFLOPs"] =
      benchmark::Counter(2.0 * L * L * (d + n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Item 3: the Monte Carlo simulator (R draws of M features, moments of K_hat and K_hat C per entry).
void monte_carlo(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1), M = st.range(2), R = st.range(3), n = 16;
  const SetPair& p = data(d, L);
  const auto e = make_estimator(name, p.X, p.Y);
  const arma::mat C = c_matrix(L, n);
  const MonteCarloOptions opt{.reps = R, .features = M, .seed = 1, .sampler = Sampler::Iid};
  const double mc = e->info().complex ? 2.0 * M : double(M);
  for (auto _ : st) benchmark::DoNotOptimize(simulate(*e, kGauss, p.X, p.Y, opt, &C));
  st.counters["GFLOPs"] = benchmark::Counter(R * (4.0 * L * d * M + 2.0 * L * L * mc + 4.0 * L * mc * n) * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
}

// Issue 17: the exact variance of K-hat C (analysis/operator_variance.hpp), O(L^3 n) work in BLAS-shaped tiles, to set
// beside one exact L x L x L product (dgemm at n = L).
void kc_variance(benchmark::State& st, const std::string& name) {
  const arma::uword L = st.range(0), d = st.range(1), n = st.range(2);
  const SetPair& p = data(d, L);
  const auto e = make_estimator(name, p.X, p.Y);
  const ThreePointForm form = *three_point_form(*e);
  const arma::mat C = c_matrix(L, n);
  for (auto _ : st) benchmark::DoNotOptimize(kc_moments(form, kGauss, p.X, p.Y, C));
  st.counters["L3n_GFLOPs"] =
      benchmark::Counter(2.0 * L * L * L * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The machine's limit: DGEMM through Armadillo (the same BLAS kestrel links), square n x n.
void dgemm(benchmark::State& st) {
  const arma::uword n = st.range(0);
  arma::arma_rng::set_seed(1);
  const arma::mat A(n, n, arma::fill::randn), B(n, n, arma::fill::randn);
  arma::mat Cm(n, n);
  // OpenBLAS on all cores for this one measurement (kestrel's own code runs it single-threaded inside TBB blocks).
  const char* t = std::getenv("KESTREL_THREADS");
  set_blas_threads(t ? std::atoi(t) : static_cast<int>(std::thread::hardware_concurrency()));
  for (auto _ : st) {
    Cm = A * B;
    benchmark::DoNotOptimize(Cm.memptr());
  }
  set_blas_threads(1);
  st.counters["GFLOPs"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Nadaraya-Watson classification on a UCI set (CRT 5.2 protocol, reduced to `seeds` draws): fixed 90/5/5
// split (seed 0), standardised on train; for each sigma of logspace(-2, 2, 10) the estimator is fitted on
// (sigma val, sigma train) and `seeds` orthogonal draws of M = 128 features (64 complex) give validation
// accuracies. Returns the mean validation accuracy per sigma. name "exact": the exact scores (no seeds).
struct NwData {
  arma::mat train, val;
  arma::uvec ytrain, yval;
  arma::uword classes = 0;
};

const NwData& nw_data() {
  static const NwData nd = [] {
    const UciData u = load_uci(default_data_dir(), "banknote");
    const Split s = split_90_5_5(u.X.n_cols, 0);
    const Standardizer z = Standardizer::fit(u.X.cols(s.train));
    return NwData{z.apply(u.X.cols(s.train)), z.apply(u.X.cols(s.validation)), u.labels(s.train),
                  u.labels(s.validation), static_cast<arma::uword>(u.classes.size())};
  }();
  return nd;
}

arma::vec nw_protocol(const std::string& name, int seeds) {
  const NwData& nd = nw_data();
  const arma::vec sigmas = arma::logspace(-2, 2, 10);
  arma::vec acc(sigmas.n_elem, arma::fill::zeros);
  for (arma::uword k = 0; k < sigmas.n_elem; ++k) {
    const double sg = sigmas(k);
    if (name == "exact") {
      const arma::mat sc = nw_log_scores_exact(nd.train, nd.ytrain, nd.classes, nd.val, sg);
      acc(k) = accuracy(argmax_rows_per_column(sc), nd.yval);
      continue;
    }
    const auto e = make_estimator(name, sg * nd.val, sg * nd.train);
    const arma::uword M = e->info().complex ? 64 : 128;
    for (int s = 0; s < seeds; ++s) {
      Rng rng(static_cast<std::uint64_t>(s), Stream::Features, k);
      const Draw w = e->draw(M, rng, Sampler::Orthogonal);
      const arma::mat sc = nw_scores_rf(*e, w, nd.train, nd.ytrain, nd.classes, nd.val, sg);
      acc(k) += accuracy(argmax_rows_per_column(sc), nd.yval) / seeds;
    }
  }
  return acc;
}

void nw(benchmark::State& st, const std::string& name) {
  const int seeds = static_cast<int>(st.range(0));
  nw_data();
  for (auto _ : st) benchmark::DoNotOptimize(nw_protocol(name, seeds));
}

// Hot paths before and after issue #8 on one 256 x 256 tile (the tile size of analysis/pairwise.hpp): the plain
// loops below are the pre-#8 library code, kept here as the baseline. Single-threaded, so the CPU-time column is
// meaningful even on a loaded machine. Counter max_abs_diff: largest difference to the baseline (0 = bit-identical).
arma::mat plain_sq_norm_sum(const arma::mat& X, const arma::mat& Y, double s) {
  arma::mat out(X.n_cols, Y.n_cols);
  for (arma::uword j = 0; j < Y.n_cols; ++j)
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      double acc = 0;
      for (arma::uword l = 0; l < X.n_rows; ++l) {
        const double v = X(l, i) + s * Y(l, j);
        acc += v * v;
      }
      out(i, j) = acc;
    }
  return out;
}

arma::mat plain_discrete(const DiscreteParams& q, const arma::mat& X, const arma::mat& Y) {
  const bool pois = q.kind == DiscreteKind::Poisson;
  const double neg_log_p = pois ? 0.0 : -std::log(q.p), scale = pois ? 0.0 : 2.0 / std::sqrt(1.0 - q.p);
  arma::mat out(X.n_cols, Y.n_cols);
  for (arma::uword j = 0; j < Y.n_cols; ++j)
    for (arma::uword i = 0; i < X.n_cols; ++i) {
      double H = 0;
      for (arma::uword l = 0; l < X.n_rows; ++l) {
        const double t = X(l, i) * Y(l, j);
        const double r = t - q.lambda;
        const double h = pois ? r * r / q.lambda : neg_log_p + log_bessel_i0(scale * std::abs(t)) - 2.0 * t;
        H += h > 0 ? h : 0.0;
      }
      out(i, j) = discrete_log_var_from_sum(H);
    }
  return out;
}

void hotpath(benchmark::State& st, const std::string& what, bool plain) {
  const SetPair& p = data(64, 256);
  const DiscreteParams q = what == "pois" ? DiscreteParams{DiscreteKind::Poisson, 0.25, 0.5}
                                          : DiscreteParams{DiscreteKind::Geometric, 1.0, 0.86};
  const DiscreteEstimator e(what, 64, q);
  // the NW stabiliser's exp (issue #19): std::exp entry by entry, or its bits 8 at a time; arguments in [-700, 0]
  const arma::mat E0 =
      what == "exp" ? arma::mat(-700 * arma::randu(256, 256, arma::distr_param(0.0, 1.0))) : arma::mat();
  auto run = [&](bool base) {
    if (what == "exp") {
      arma::mat E = E0;
      if (base)
        E.transform([](double v) { return std::exp(v); });
      else
        simd::exp_libm(E.memptr(), E.n_elem);
      return E;
    }
    if (what == "sq_norm_sum") return base ? plain_sq_norm_sum(p.X, p.Y, 1.0) : pairwise_sq_norm_sum(p.X, p.Y, 1.0);
    return base ? plain_discrete(q, p.X, p.Y) : e.log_var_over_k2(p.X, p.Y);
  };
  for (auto _ : st) benchmark::DoNotOptimize(run(plain));
  st.counters["max_abs_diff"] = arma::abs(run(true) - run(false)).max();
  st.counters["pairs_per_s"] = benchmark::Counter(256.0 * 256, benchmark::Counter::kIsIterationInvariantRate);
}

// pois+, geom+ and saderf: issue #19.
const std::vector<std::string> kPairwise = {"trig",  "pos",   "gerf",  "oprf",   "pois", "geom",       "pois+",
                                            "geom+", "aderf", "sderf", "saderf", "dark", "hrf-angular"};
const std::vector<std::string> kFit = {"oprf", "gerf", "pois", "geom", "aderf", "sderf", "dark"};
const std::vector<std::string> kFeatures = {"pos", "oprf", "trig", "aderf"};

void register_all() {
  using benchmark::RegisterBenchmark;
  for (const auto& n : kPairwise)
    RegisterBenchmark(("pairwise/" + n).c_str(), pairwise, n)
        ->ArgNames({"L", "d"})
        ->Args({1024, 64})
        ->Args({4096, 64})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  RegisterBenchmark("pairwise_floor", pairwise_floor)
      ->ArgNames({"L", "d"})
      ->Args({1024, 64})
      ->Args({4096, 64})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  // Memory check, registered only with KESTREL_BENCH_LARGE=1 (run.sh runs it alone under /usr/bin/time):
  // L = 65536 streams in 256 x 256 tiles, never an L x L matrix.
  if (std::getenv("KESTREL_BENCH_LARGE"))
    RegisterBenchmark("pairwise_large/pos", pairwise, std::string("pos"))
        ->ArgNames({"L", "d"})
        ->Args({65536, 64})
        ->Iterations(1)
        ->Unit(benchmark::kSecond)
        ->UseRealTime();
  for (const auto& w : {"sq_norm_sum", "pois", "geom", "exp"}) {
    RegisterBenchmark((std::string("hotpath/") + w + "/plain_pre8").c_str(), hotpath, std::string(w), true);
    RegisterBenchmark((std::string("hotpath/") + w + "/kestrel").c_str(), hotpath, std::string(w), false);
  }
  for (const auto& n : kFit) {
    auto* b = RegisterBenchmark(("fit/" + n).c_str(), fit, n)->ArgNames({"L", "d"});
    for (int L = 1024; L <= 65536; L *= 4) b->Args({L, 64});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  for (const auto& n : {"aderf", "sderf"}) {  // scaling in d: O(L d^2 + d^3)
    auto* b = RegisterBenchmark((std::string("scale_fit_d/") + n).c_str(), fit, std::string(n))->ArgNames({"L", "d"});
    for (int d = 16; d <= 256; d *= 2) b->Args({16384, d});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  for (const auto& n : kFeatures) {
    RegisterBenchmark(("feature_map/" + n).c_str(), feature_map_bench, n)
        ->ArgNames({"L", "d", "M"})
        ->Args({16384, 64, 256})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    RegisterBenchmark(("kernel_times_rf/" + n).c_str(), kernel_times_rf, n)
        ->ArgNames({"L", "d", "M", "n"})
        ->Args({16384, 64, 256, 64})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const auto& n : {"pos", "trig"})
    RegisterBenchmark((std::string("monte_carlo/") + n).c_str(), monte_carlo, std::string(n))
        ->ArgNames({"L", "d", "M", "R"})
        ->Args({512, 64, 256, 32})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  RegisterBenchmark("dgemm", dgemm)->ArgName("n")->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (const auto& n : {"pos", "oprf", "sderf"})
    RegisterBenchmark((std::string("kc_variance/") + n).c_str(), kc_variance, std::string(n))
        ->ArgNames({"L", "d", "n"})
        ->Args({4096, 64, 1})
        ->Args({1024, 64, 16})
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  // Scaling (log-log slopes in bench/report.py): exact vs random-feature K C in L, M, d; pairwise variance in L, d.
  {
    auto* ex = RegisterBenchmark("scale_exact_kc", kernel_times_exact)->ArgNames({"L", "d", "n"});
    for (int L = 1024; L <= 8192; L *= 2) ex->Args({L, 64, 64});
    for (int d = 16; d <= 256; d *= 2) ex->Args({4096, d, 64});
    ex->Unit(benchmark::kMillisecond)->UseRealTime();
    auto* rf =
        RegisterBenchmark("scale_rf_kc/oprf", kernel_times_rf, std::string("oprf"))->ArgNames({"L", "d", "M", "n"});
    for (int L = 1024; L <= 16384; L *= 2) rf->Args({L, 64, 256, 64});
    for (int M = 64; M <= 1024; M *= 2) rf->Args({8192, 64, M, 64});
    for (int d = 16; d <= 256; d *= 2) rf->Args({8192, d, 256, 64});
    rf->Unit(benchmark::kMillisecond)->UseRealTime();
    auto* pw = RegisterBenchmark("scale_pairwise/oprf", pairwise, std::string("oprf"))->ArgNames({"L", "d"});
    for (int L = 512; L <= 4096; L *= 2) pw->Args({L, 64});
    for (int d = 16; d <= 256; d *= 2) pw->Args({1024, d});
    pw->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  for (const auto& n : {"exact", "pos", "oprf"})
    RegisterBenchmark((std::string("nw_banknote/") + n).c_str(), nw, std::string(n))
        ->ArgName("seeds")
        ->Arg(50)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

void save_raw(const arma::mat& A, const std::filesystem::path& p) {
  if (!A.save(p.string(), arma::raw_binary)) throw std::runtime_error("cannot write " + p.string());
}

// Data, parameters and reference values for bench/numpy_peer.py (raw little-endian doubles, column-major d x L).
void dump(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::json j;
  j["sigma"] = kSigma;
  for (arma::uword L : {1024u, 4096u, 16384u}) {
    const SetPair& p = data(64, L);
    save_raw(p.X, dir / ("X_" + std::to_string(L) + ".bin"));
    save_raw(p.Y, dir / ("Y_" + std::to_string(L) + ".bin"));
  }
  // Issue #19's crt-fig2 cell: the 5 set pairs of `kestrel variance --regime normal --sigma 1 --dim 64 --points 1024
  // --pairs 5` (seed 1), which run.sh times through the CLI and the NumPy peer recomputes.
  for (arma::uword k = 0; k < 5; ++k) {
    const SetPair c =
        draw_regime({.name = "normal", .dim = 64, .points = 1024, .sigma = 1.0, .seed = 1, .pair_index = k});
    save_raw(c.X, dir / ("cell_X_" + std::to_string(k) + ".bin"));
    save_raw(c.Y, dir / ("cell_Y_" + std::to_string(k) + ".bin"));
  }
  const SetPair& p = data(64, 1024);
  for (const auto& n : kPairwise) {
    const auto e = make_estimator(n, p.X, p.Y);
    const PairwiseSummary s = summarize_exact_variance(*e, kGauss, p.X, p.Y);
    j["pairwise"][n] = {{"params", e->params()},
                        {"mean_log_var", s.log_var.mean},
                        {"std_log_var", s.log_var.stddev()},
                        {"mean_log_rel_var", s.log_rel_var.mean},
                        {"n_exact", s.n_exact}};
  }
  const SetPair& q = data(64, 16384);
  const arma::mat C = c_matrix(16384, 64);
  for (const auto& n : {"pos", "oprf", "trig"}) {
    const auto e = make_estimator(n, q.X, q.Y);
    const Draw w = feature_draw(*e, 256);
    save_raw(w.omega, dir / (std::string("W_") + n + ".bin"));
    const arma::mat P = feature_map(*e, w, q.X, Side::Query, kGauss);
    const arma::mat KC = approximate_kernel_times(*e, w, q.X, q.Y, C, kGauss);
    j["features"][n] = {{"params", e->params()},
                        {"P_head", arma::conv_to<std::vector<double>>::from(arma::vectorise(P.submat(0, 0, 2, 2)))},
                        {"KC_head", arma::conv_to<std::vector<double>>::from(arma::vectorise(KC.submat(0, 0, 2, 2)))}};
  }
  const NwData& nd = nw_data();
  save_raw(nd.train, dir / "nw_train.bin");
  save_raw(nd.val, dir / "nw_val.bin");
  save_raw(arma::conv_to<arma::vec>::from(nd.ytrain), dir / "nw_ytrain.bin");
  save_raw(arma::conv_to<arma::vec>::from(nd.yval), dir / "nw_yval.bin");
  j["nw"] = {{"d", nd.train.n_rows}, {"classes", nd.classes}};
  for (const auto& n : {"exact", "pos", "oprf"})
    j["nw"]["val_accuracy"][n] = arma::conv_to<std::vector<double>>::from(nw_protocol(n, 50));
  std::ofstream(dir / "kestrel_values.json") << j.dump(1) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<tbb::global_control> limit;
  if (const char* t = std::getenv("KESTREL_THREADS"))
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, std::atoi(t));
  if (argc == 3 && std::string(argv[1]) == "--dump") {
    dump(argv[2]);
    return 0;
  }
  single_threaded_blas();  // as the CLI runs kestrel
  keep_freed_memory();
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
