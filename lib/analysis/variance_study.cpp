// Variance study over regimes, sigmas and estimators (see variance_study.hpp).
#include "analysis/variance_study.hpp"

#include <cmath>

#include "analysis/montecarlo.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"
#include "io/hdf5.hpp"

namespace kestrel {

void validate(const VarianceStudyOptions& opt) {
  validate_regime(opt.regime);
  require(!opt.sigmas.empty(), "at least one sigma is needed");
  for (double s : opt.sigmas) require(std::isfinite(s) && s > 0, "sigma must be > 0, got {}", s);
  require(opt.dim > 0, "dimension d must be > 0, got {}", opt.dim);
  require(opt.points > 0, "number of points L must be > 0, got {}", opt.points);
  require(opt.pairs > 0, "number of set pairs must be > 0, got {}", opt.pairs);
  require(opt.features > 0, "number of features M must be > 0, got {}", opt.features);
  require(!opt.estimators.empty(), "at least one estimator is needed");
  for (const auto& e : opt.estimators) find_family(e);
  require(std::isfinite(opt.kernel.alpha), "kernel alpha must be finite, got {}", opt.kernel.alpha);
  require(opt.mc_reps == 0 || opt.mc_reps >= 4, "Monte Carlo needs at least 4 repetitions, got {}", opt.mc_reps);
  require(opt.mc_reps == 0 || opt.mc_points > 0, "Monte Carlo points must be > 0, got {}", opt.mc_points);
}

nlohmann::json to_json(const VarianceStudyOptions& opt) {
  return {{"regime", opt.regime},   {"sigmas", opt.sigmas},         {"dim", opt.dim},
          {"points", opt.points},   {"pairs", opt.pairs},           {"seed", opt.seed},
          {"estimators", opt.estimators}, {"kernel", opt.kernel.name()}, {"kernel_alpha", opt.kernel.alpha},
          {"features", opt.features}, {"mc_reps", opt.mc_reps},     {"mc_points", opt.mc_points},
          {"sampler", to_string(opt.sampler)}, {"regime_options", to_json(opt.regime_options)},
          {"halve_real", opt.halve_real}, {"halve_real_rule", kHalveRealRule}};
}

namespace {

McSummary monte_carlo(const Estimator& e, const SetPair& sp, const VarianceStudyOptions& opt, arma::uword M,
                      std::uint64_t set_index, McSummary acc) {
  const arma::uword n = std::min<arma::uword>(opt.mc_points, opt.points);
  const arma::mat X = sp.X.cols(0, n - 1), Y = sp.Y.cols(0, n - 1);
  MonteCarloOptions mo{opt.mc_reps, M, opt.seed ^ mix64(set_index + 1), opt.sampler};
  const MonteCarloResult r = simulate(e, opt.kernel, X, Y, mo);
  const arma::mat exact = log_variance(e, opt.kernel, X, Y, M);
  double within = acc.frac_var_within_3se * acc.entries;
  for (arma::uword k = 0; k < exact.n_elem; ++k) {
    const double v = r.kernel.variance(k), se_m = r.kernel.se_mean(k);
    if (se_m > 0) acc.max_abs_z_mean = std::max(acc.max_abs_z_mean, std::abs(r.kernel.mean(k) - r.kernel.exact(k)) / se_m);
    const double ve = std::exp(exact(k));
    if (std::abs(v - ve) < 3 * r.kernel.se_variance(k) || (v == 0 && exact(k) == -kInf)) within += 1;
    ++acc.entries;
    if (v > 0 && exact(k) > -kInf) {
      acc.log_var_mc.add(std::log(v));
      acc.log_var_exact.add(exact(k));
    }
  }
  acc.frac_var_within_3se = within / acc.entries;
  return acc;
}

}  // namespace

std::vector<VarianceResult> run_variance_study(const VarianceStudyOptions& opt, const Progress& progress) {
  validate(opt);
  std::vector<VarianceResult> out;
  for (double sigma : opt.sigmas) {
    std::vector<VarianceResult> row(opt.estimators.size());
    for (std::size_t k = 0; k < row.size(); ++k) row[k].estimator = opt.estimators[k], row[k].sigma = sigma;
    for (arma::uword p = 0; p < opt.pairs; ++p) {
      if (progress) progress(fmt::format("{} sigma={} set pair {}/{}", opt.regime, sigma, p + 1, opt.pairs));
      const SetPair sp = draw_regime(opt.regime, opt.dim, opt.points, sigma, opt.seed, p, opt.regime_options);
      for (std::size_t k = 0; k < row.size(); ++k) {
        const auto e = make_estimator(opt.estimators[k], sp.X, sp.Y);
        const arma::uword M = opt.features * (opt.halve_real && halved_by_halve_real(opt.estimators[k]) ? 2 : 1);
        row[k].features = M;
        const PairwiseSummary s = summarize_exact_variance(*e, opt.kernel, sp.X, sp.Y, 256, M);
        row[k].summary.merge(s);
        row[k].per_set.push_back(s);
        row[k].params.push_back(e->params());
        if (opt.mc_reps > 0) row[k].mc = monte_carlo(*e, sp, opt, M, p, row[k].mc.value_or(McSummary{}));
      }
    }
    for (auto& r : row) out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json to_json(const VarianceResult& r, const VarianceStudyOptions& opt) {
  nlohmann::json per_set = nlohmann::json::array();
  for (const auto& s : r.per_set) per_set.push_back(s.log_var.mean);
  nlohmann::json j = {
      {"estimator", r.estimator},
      {"regime", opt.regime},
      {"sigma", r.sigma},
      {"d", opt.dim},
      {"L", opt.points},
      {"kernel", opt.kernel.name()},
      {"features", r.features},
      {"mean_log_var", r.summary.log_var.mean},
      {"std_log_var", r.summary.log_var.stddev()},
      {"mean_log_rel_var", r.summary.log_rel_var.mean},
      {"std_log_rel_var", r.summary.log_rel_var.stddev()},
      {"mean_log_kernel", r.summary.log_kernel.mean},
      {"n_pairs", static_cast<std::uint64_t>(r.summary.log_kernel.n)},
      {"n_exact", r.summary.n_exact},
      {"mean_log_var_per_set", per_set},
      {"params", r.params},
  };
  if (r.mc) {
    j["mc"] = {{"reps", opt.mc_reps},
               {"points", std::min(opt.mc_points, opt.points)},
               {"entries", r.mc->entries},
               {"mean_log_var", r.mc->log_var_mc.mean},
               {"std_log_var", r.mc->log_var_mc.stddev()},
               {"exact_mean_log_var", r.mc->log_var_exact.mean},
               {"max_abs_z_mean", r.mc->max_abs_z_mean},
               {"frac_var_within_3se", r.mc->frac_var_within_3se}};
  }
  return j;
}

}  // namespace kestrel

namespace kestrel {

void write_h5(H5Writer& h5, const std::string& group, const std::vector<VarianceResult>& results,
              const VarianceStudyOptions& opt) {
  for (const auto& name : opt.estimators) {
    const std::string g = group + "/" + name;
    h5.group(g);
    std::vector<double> sig, mlv, slv, mlr, slr, npairs, nexact, feats, mcm, mce, mcz, mcf;
    arma::mat per_set(opt.sigmas.size(), opt.pairs);
    nlohmann::json params = nlohmann::json::array();
    for (const auto& r : results) {
      if (r.estimator != name) continue;
      const std::size_t row = sig.size();
      sig.push_back(r.sigma);
      mlv.push_back(r.summary.log_var.mean);
      slv.push_back(r.summary.log_var.stddev());
      mlr.push_back(r.summary.log_rel_var.mean);
      slr.push_back(r.summary.log_rel_var.stddev());
      npairs.push_back(r.summary.log_kernel.n);
      nexact.push_back(static_cast<double>(r.summary.n_exact));
      feats.push_back(static_cast<double>(r.features));
      for (std::size_t p = 0; p < r.per_set.size(); ++p) per_set(row, p) = r.per_set[p].log_var.mean;
      params.push_back({{"sigma", r.sigma}, {"per_set", r.params}});
      if (r.mc) {
        mcm.push_back(r.mc->log_var_mc.mean);
        mce.push_back(r.mc->log_var_exact.mean);
        mcz.push_back(r.mc->max_abs_z_mean);
        mcf.push_back(r.mc->frac_var_within_3se);
      }
    }
    h5.write(g + "/sigma", sig);
    h5.write(g + "/mean_log_var", mlv);
    h5.write(g + "/std_log_var", slv);
    h5.write(g + "/mean_log_rel_var", mlr);
    h5.write(g + "/std_log_rel_var", slr);
    h5.write(g + "/n_pairs", npairs);
    h5.write(g + "/n_exact", nexact);
    h5.write(g + "/features", feats);
    h5.write(g + "/per_set_mean_log_var", per_set);
    h5.write_text(g + "/params", params.dump());
    if (!mcm.empty()) {
      h5.write(g + "/mc_mean_log_var", mcm);
      h5.write(g + "/mc_exact_mean_log_var", mce);
      h5.write(g + "/mc_max_abs_z_mean", mcz);
      h5.write(g + "/mc_frac_var_within_3se", mcf);
    }
  }
}

}  // namespace kestrel
