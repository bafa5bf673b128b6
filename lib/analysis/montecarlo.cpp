// Monte Carlo simulator over feature draws (see montecarlo.hpp).
#include "analysis/montecarlo.hpp"

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kestrel {

namespace {

// Power sums of (estimate - exact); shifting by the exact value keeps the sums well conditioned.
struct PowerSums {
  arma::mat s1, s2, s3, s4;
  void init(arma::uword r, arma::uword c) { s1.zeros(r, c), s2.zeros(r, c), s3.zeros(r, c), s4.zeros(r, c); }
  void add(const arma::mat& delta) {
    const arma::mat d2 = delta % delta;
    s1 += delta, s2 += d2, s3 += d2 % delta, s4 += d2 % d2;
  }
  void merge(const PowerSums& o) { s1 += o.s1, s2 += o.s2, s3 += o.s3, s4 += o.s4; }
};

EntryMoments moments(const PowerSums& p, const arma::mat& exact, double R) {
  EntryMoments m;
  m.exact = exact;
  const arma::mat mu = p.s1 / R;  // mean of delta
  const arma::mat c2 = p.s2 / R - mu % mu;
  const arma::mat c4 = p.s4 / R - 4 * mu % p.s3 / R + 6 * (mu % mu) % p.s2 / R - 3 * arma::pow(mu, 4);
  m.mean = exact + mu;
  m.variance = arma::clamp(c2, 0.0, arma::datum::inf) * (R / (R - 1));
  m.se_mean = arma::sqrt(m.variance / R);
  m.se_variance =
      arma::sqrt(arma::clamp(c4 - (m.variance % m.variance) * ((R - 3) / (R - 1)), 0.0, arma::datum::inf) / R);
  return m;
}

}  // namespace

MonteCarloResult simulate(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                          const MonteCarloOptions& opt, const arma::mat* C) {
  validate_pair(X, Y, e.dim());
  require(opt.reps >= 4, "Monte Carlo needs at least 4 repetitions, got {}", opt.reps);
  require(opt.features > 0, "number of features M must be > 0, got 0");
  if (C)
    require(C->n_rows == Y.n_cols && C->n_cols > 0 && C->is_finite(), "C must be a finite {} x n matrix, got {} x {}",
            Y.n_cols, C->n_rows, C->n_cols);

  const arma::mat K = arma::exp(log_kernel(k, X, Y));
  const arma::mat KC = C ? kernel_times(k, X, Y, *C) : arma::mat();
  constexpr std::size_t kChunks = 16;  // fixed: independent of the thread count
  const std::size_t n_chunks = std::min(kChunks, opt.reps);
  std::vector<PowerSums> sk(n_chunks), skc(n_chunks);
  for_each_block(n_chunks, [&](std::size_t c) {
    sk[c].init(K.n_rows, K.n_cols);
    if (C) skc[c].init(KC.n_rows, KC.n_cols);
    const std::size_t r0 = opt.reps * c / n_chunks, r1 = opt.reps * (c + 1) / n_chunks;
    for (std::size_t r = r0; r < r1; ++r) {
      Rng rng(opt.seed, Stream::MonteCarlo, r);
      const Draw w = e.draw(opt.features, rng, opt.sampler);
      // Same products as approximate_kernel(_times), sharing one feature map per side.
      const arma::mat P = feature_map(e, w, X, Side::Query, k);
      const arma::mat S = feature_map(e, w, Y, Side::Key, k);
      sk[c].add(P * S.t() - K);
      if (C) skc[c].add(P * (S.t() * *C) - KC);
    }
  });
  for (std::size_t c = 1; c < n_chunks; ++c) {
    sk[0].merge(sk[c]);
    if (C) skc[0].merge(skc[c]);
  }
  MonteCarloResult res;
  res.reps = opt.reps;
  res.features = opt.features;
  res.kernel = moments(sk[0], K, static_cast<double>(opt.reps));
  if (C) res.kernel_times = moments(skc[0], KC, static_cast<double>(opt.reps));
  if (!res.kernel.mean.is_finite() || !res.kernel.variance.is_finite())
    throw NumericalError(fmt::format("estimator '{}': Monte Carlo estimates overflowed (non-finite)", e.info().name));
  return res;
}

}  // namespace kestrel
