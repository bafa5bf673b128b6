// advise's --validate: the row's M measured with fresh draws through the production attention code
// (approximate_attention), or for kernel entries by the Monte Carlo simulator; it shares nothing with the prediction.
#include "tasks/advise/steps.hpp"

#include <cmath>
#include <cstdint>
#include <functional>

#include <fmt/format.h>

#include "analysis/montecarlo.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "tasks/attention.hpp"

namespace kestrel::advise_steps {

namespace {

// Per sampled row: mean over R independent draws of M features of the metric's per-draw quantity (|Y-hat_i - Y_i|^2,
// mean_a |Y-hat_ia - Y_ia|, or (D-hat_i / D_i - 1)^2 for the normalisers), and its standard error. The production path
// (approximate_attention, stabilised) with fresh draws: it shares neither the nested draws nor the blocked
// accumulation with the prediction. Fixed chunks: thread-count independent.
std::pair<arma::vec, arma::vec> measure_rows(const Estimator& e, const Inputs& in, const ExactAttention& exact,
                                             arma::uword M, Sampler sampler, std::size_t reps, std::uint64_t seed,
                                             AdviseMetric metric) {
  const arma::mat Qr = in.Qa.cols(in.rows);
  constexpr std::size_t kChunks = 16;
  const std::size_t n_chunks = std::min(kChunks, reps);
  std::vector<arma::vec> s1(n_chunks), s2(n_chunks);
  for_each_block(n_chunks, [&](std::size_t c) {
    s1[c].zeros(Qr.n_cols);
    s2[c].zeros(Qr.n_cols);
    for (std::size_t r = reps * c / n_chunks; r < reps * (c + 1) / n_chunks; ++r) {
      Rng rng(seed, Stream::MonteCarlo, r);
      const Draw w = draw_columns(e, M, rng, sampler);
      const ApproxAttention a = approximate_attention(e, w, Qr, in.Ka, in.V);
      arma::vec err;
      if (in.normaliser)
        err = arma::square(a.normaliser % arma::exp(a.log_scale - exact.log_normaliser) - 1);
      else if (squared(metric))
        err = arma::sum(arma::square(a.Y - exact.Y), 1);
      else
        err = arma::mean(arma::abs(a.Y - exact.Y), 1);
      s1[c] += err;
      s2[c] += arma::square(err);
    }
  });
  arma::vec t1 = s1[0], t2 = s2[0];
  for (std::size_t c = 1; c < n_chunks; ++c) t1 += s1[c], t2 += s2[c];
  const double R = static_cast<double>(reps);
  const arma::vec mean = t1 / R;
  const arma::vec se = arma::sqrt(arma::clamp(t2 / R - arma::square(mean), 0, kInf) / (R - 1));
  return {mean, se};
}

// Median and 95th percentile over rows of the measured errors, and the SE at the 95th percentile (quantile_se).
void summarise_measured(AdviceRow& row, const arma::vec& err, const arma::vec& se) {
  row.measured_median = quantile(err, 0.5);
  row.measured_p95 = quantile(err, 0.95);
  row.measured_p95_se = quantile_se(err, se, 0.95);
}

}  // namespace

// --validate: R fresh draws at the row's M through the production code, the measured error next to the prediction.
void validate_row(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact, Sampler sampler,
                  const AdviseOptions& opt, const std::function<void(const std::string&)>& say) {
  row.validate_reps = opt.validate;
  row.validate_m = row.m_p95;
  say(fmt::format("validating {} ({}) at M = {} with {} draws", row.estimator, row.sampler, row.validate_m,
                  opt.validate));
  if (opt.quantity == AdviseQuantity::Attention) {
    const auto [mean, se] = measure_rows(e, in, exact, row.validate_m, sampler, opt.validate, opt.seed, opt.metric);
    const auto [err, err_se] = row_errors(mean, se, in.norm, opt.metric);
    summarise_measured(row, err, err_se);
  } else {
    const MonteCarloResult mc = simulate(e, opt.kernel, in.Qk.cols(in.rows), in.Kk.cols(in.keys),
                                         {opt.validate, row.validate_m, opt.seed, sampler});
    const arma::vec k2 = arma::vectorise(arma::square(mc.kernel.exact));
    const auto [err, err_se] =
        row_errors(arma::vectorise(mc.kernel.variance) / k2, arma::vectorise(mc.kernel.se_variance) / k2,
                   arma::ones(k2.n_elem), AdviseMetric::Rmse);
    summarise_measured(row, err, err_se);
  }
}

}  // namespace kestrel::advise_steps
