// Time per head of fitting Hedgehog maps (issue 65 item 5): learned_attention_curve on one head of d = 64 with two
// sequences of L tokens (one fitted, one held out), M = 32 then 64 (warm start), one fit seed, the default stop rule
// (at most 100 L-BFGS iterations) and at most 1024 fitted query rows per sequence. Prints one line per (L, M).
// Build and run: bash bench/learned_fit.sh BUILD_DIR [L ...].
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "tasks/learned_attention.hpp"

using namespace kestrel;

namespace {

// A sharp head as tests/learned_attention_test.cpp's: 16 orthonormal directions, aligned logits 6, noise 0.5.
HeadSequences head(arma::uword n, arma::uword L) {
  const arma::uword d = 64, C = 16, dv = 64;
  const double a = std::sqrt(6.0 * 8.0), noise = 0.5;
  Rng rng(1, Stream::User, 1000);
  arma::mat U, R;
  if (!arma::qr_econ(U, R, rng.normal_matrix(d, C))) std::abort();
  HeadSequences h;
  for (arma::uword s = 0; s < n; ++s) {
    Rng r(1, Stream::User, s);
    arma::mat Q(d, L), K(d, L);
    for (arma::uword j = 0; j < L; ++j) {
      Q.col(j) = a * U.col(static_cast<arma::uword>(r.uniform() * C));
      K.col(j) = a * U.col(static_cast<arma::uword>(r.uniform() * C));
    }
    h.Q.push_back(Q + noise * r.normal_matrix(d, L));
    h.K.push_back(K + noise * r.normal_matrix(d, L));
    h.V.push_back(r.normal_matrix(L, dv));
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  single_threaded_blas();  // as the kestrel command line runs
  keep_freed_memory();
  std::vector<arma::uword> lengths = {512, 4096};
  if (argc > 1) lengths.clear();
  for (int i = 1; i < argc; ++i) lengths.push_back(std::strtoul(argv[i], nullptr, 10));
  std::printf("L,M,fit_seconds,iterations,evaluations,seconds_per_evaluation,held_out_p95,train_p95,curve_seconds\n");
  for (const arma::uword L : lengths) {
    const HeadSequences h = head(2, L);
    const auto t0 = std::chrono::steady_clock::now();
    const auto curve = learned_attention_curve(h, {.features = {32, 64}, .held_out = 1, .fit_seeds = 1});
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& c : curve) {
      const auto& f = c.fits[0];
      std::printf("%llu,%llu,%.3f,%llu,%llu,%.4f,%.4f,%.4f,%.3f\n", static_cast<unsigned long long>(L),
                  static_cast<unsigned long long>(c.M), f.fit_seconds,
                  static_cast<unsigned long long>(f.fit.iterations), static_cast<unsigned long long>(f.fit.evaluations),
                  f.fit_seconds / static_cast<double>(std::max<arma::uword>(f.fit.evaluations, 1)), f.held_out.quantile,
                  f.train.quantile, total);
    }
  }
  return 0;
}
