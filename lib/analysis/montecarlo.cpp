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

// simulate() and simulate_shared(), with the optional C.
std::vector<MonteCarloResult> simulate_shared(const std::vector<const Estimator*>& es, const Kernel& k,
                                              const arma::mat& X, const arma::mat& Y, const MonteCarloOptions& opt,
                                              const arma::mat* C) {
  require(!es.empty(), "no estimators to simulate");
  for (const Estimator* e : es) validate_pair(X, Y, e->dim());
  require(opt.reps >= 4, "Monte Carlo needs at least 4 repetitions, got {}", opt.reps);
  require(opt.features > 0, "number of features M must be > 0, got 0");
  if (C)
    require(C->n_rows == Y.n_cols && C->n_cols > 0 && C->is_finite(), "C must be a finite {} x n matrix, got {} x {}",
            Y.n_cols, C->n_rows, C->n_cols);
  for (std::size_t q = 1; q < es.size(); ++q) {
    Rng r0(opt.seed, Stream::MonteCarlo, 0), rq(opt.seed, Stream::MonteCarlo, 0);
    const Draw a = es[0]->draw(opt.features, r0, opt.sampler), b = es[q]->draw(opt.features, rq, opt.sampler);
    require(a == b, "estimators '{}' and '{}' draw differently: simulate them separately", es[0]->info().name,
            es[q]->info().name);
  }

  const arma::mat K = arma::exp(log_kernel(k, X, Y));
  const arma::mat KC = C ? kernel_times(k, X, Y, *C) : arma::mat();
  constexpr std::size_t kChunks = 16;  // fixed: independent of the thread count
  const std::size_t n_chunks = std::min(kChunks, opt.reps), n_est = es.size();
  std::vector<PowerSums> sk(n_chunks * n_est), skc(n_chunks * n_est);  // [chunk * n_est + estimator]
  for_each_block(n_chunks, [&](std::size_t c) {
    for (std::size_t q = 0; q < n_est; ++q) {
      sk[c * n_est + q].init(K.n_rows, K.n_cols);
      if (C) skc[c * n_est + q].init(KC.n_rows, KC.n_cols);
    }
    const std::size_t r0 = opt.reps * c / n_chunks, r1 = opt.reps * (c + 1) / n_chunks;
    for (std::size_t r = r0; r < r1; ++r) {
      Rng rng(opt.seed, Stream::MonteCarlo, r);
      const Draw w = es[0]->draw(opt.features, rng, opt.sampler);
      for (std::size_t q = 0; q < n_est; ++q) {
        // Same products as approximate_kernel(_times), sharing one feature map per side.
        const arma::mat P = feature_map(*es[q], w, X, Side::Query, k);
        const arma::mat S = feature_map(*es[q], w, Y, Side::Key, k);
        sk[c * n_est + q].add(P * S.t() - K);
        if (C) skc[c * n_est + q].add(P * (S.t() * *C) - KC);
      }
    }
  });
  std::vector<MonteCarloResult> out(n_est);
  for (std::size_t q = 0; q < n_est; ++q) {
    for (std::size_t c = 1; c < n_chunks; ++c) {
      sk[q].merge(sk[c * n_est + q]);
      if (C) skc[q].merge(skc[c * n_est + q]);
    }
    MonteCarloResult& res = out[q];
    res.reps = opt.reps;
    res.features = opt.features;
    res.kernel = moments(sk[q], K, static_cast<double>(opt.reps));
    if (C) res.kernel_times = moments(skc[q], KC, static_cast<double>(opt.reps));
    if (!res.kernel.mean.is_finite() || !res.kernel.variance.is_finite())
      throw NumericalError(
          fmt::format("estimator '{}': Monte Carlo estimates overflowed (non-finite)", es[q]->info().name));
  }
  return out;
}

}  // namespace

MonteCarloResult simulate(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y,
                          const MonteCarloOptions& opt, const arma::mat* C) {
  return simulate_shared({&e}, k, X, Y, opt, C).front();
}

std::vector<MonteCarloResult> simulate_shared(const std::vector<const Estimator*>& es, const Kernel& k,
                                              const arma::mat& X, const arma::mat& Y, const MonteCarloOptions& opt) {
  return simulate_shared(es, k, X, Y, opt, nullptr);
}

}  // namespace kestrel
