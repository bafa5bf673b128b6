// advise's kernel entries: the exact error of K-hat(q, k) / K(q, k) per sampled pair and M, for iid projections from
// the family's exact variance and for orthogonal and simplex ones from the coupled variance (an isotropic form).
#include "tasks/advise/steps.hpp"

#include <cmath>
#include <cstdint>
#include <functional>

#include <fmt/format.h>

#include "analysis/coupled_variance.hpp"
#include "core/error.hpp"

namespace kestrel::advise_steps {

// Kernel entries on the grid rows x keys, with a per-M error function.
// M counts feature columns, c = columns_unit per draw: the errors are those of M / c draws, and every M is a multiple
// of c (the budget rounded down to one).
void predict_kernel(AdviceRow& row, const Estimator& e, const Inputs& in, Sampler sampler,
                    const AdviseOptions& options) {
  const arma::mat X = in.Qk.cols(in.rows), Y = in.Kk.cols(in.keys);
  const arma::mat lv1 = e.log_var_over_k2(X, Y);
  const arma::uword c = columns_unit(e);
  AdviseOptions opt = options;
  opt.budget = row_budget(e, options);
  std::function<arma::vec(arma::uword)> draws_err, err = [&](arma::uword M) { return draws_err(M / c); };
  arma::mat S;  // |x + s y|^2 of the coupled rows (outlives err, which refers to it)
  if (sampler == Sampler::Iid) {
    draws_err = [&](arma::uword M) {
      return arma::vec(arma::vectorise(arma::exp(0.5 * e.log_var_over_k2_m(X, Y, M))));
    };
    row.method = "exact";
  } else {
    const auto form = isotropic_form(e);
    if (!form) throw Undefined("no exact variance with coupled projections for this family (no isotropic form)");
    S = pairwise_sq_norm_sum(X, Y, form->s);
    draws_err = [&, f = *form](arma::uword M) {
      arma::vec out(S.n_elem);
      for (arma::uword i = 0; i < S.n_elem; ++i)
        out[i] = std::exp(0.5 * coupled_log_var_over_k2(f, e.dim(), S[i], lv1[i], M, sampler));
      return out;
    };
    row.method = "exact (coupled)";
  }
  row.log_rel_var_median = quantile(arma::vectorise(lv1), 0.5);
  row.log_rel_var_p95 = quantile(arma::vectorise(lv1), 0.95);
  const arma::vec e1 = err(c);
  row.err1_each = e1;
  row.err1_median = quantile(e1, 0.5);
  row.err1_p95 = quantile(e1, 0.95);
  const arma::vec eb = err(opt.budget);
  row.err_budget_median = quantile(eb, 0.5);
  row.err_budget_p95 = quantile(eb, 0.95);
  // Coupled features in whole blocks of d (a partial block can be worse than the whole block below it): the search is
  // over block counts, with a last partial block only where the budget ends in one.
  const arma::uword block = c * (sampler == Sampler::Iid ? 1 : e.dim());
  const arma::uword blocks = (opt.budget + block - 1) / block;
  auto smallest = [&](double q) {
    const arma::uword b = smallest_m([&](arma::uword n) { return quantile(err(std::min(opt.budget, n * block)), q); },
                                     opt.target, blocks);
    return std::min(opt.budget, b * block);
  };
  row.m_median = smallest(0.5);
  row.m_p95 = smallest(0.95);
  row.decision = row.m_p95 ? "M" : "out of reach";
  const arma::vec em = err(row.m_p95 ? row.m_p95 : opt.budget);
  row.at_m_median = quantile(em, 0.5);
  row.at_m_p95 = quantile(em, 0.95);
  for (arma::uword m : curve_grid(opt.budget / c)) {
    m *= c;
    if (block > c && m > block) m = std::min(opt.budget, (m + block - 1) / block * block);
    if (!row.curve_m.empty() && static_cast<double>(m) <= row.curve_m.back()) continue;
    const arma::vec v = err(m);
    row.curve_m.push_back(static_cast<double>(m));
    row.curve_median.push_back(quantile(v, 0.5));
    row.curve_p95.push_back(quantile(v, 0.95));
  }
  row.m_p95_low = row.m_p95_high = row.m_p95;
  row.curve_median_se = row.curve_p95_se = row.curve_draws = std::vector<double>(row.curve_m.size(), 0.0);
}

}  // namespace kestrel::advise_steps
