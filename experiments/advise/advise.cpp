// `kestrel reproduce advise` (issues 18, 34): does `kestrel advise` name the right M? On ten inputs of different kinds
// (isotropic small and large norms, anisotropic, MNIST and CIFAR-10 patch tokens, zero-mean and offset V, d from 16 to
// 128, L from 24 to 4096) advise predicts, for every applicable estimator and the iid, orthogonal and simplex samplers,
// the 95th percentile over query rows of the output-row error against M (nested-draw simulation, analysis/
// nested_attention.hpp) and names the M for a 10% target. An independent simulation then measures the same rows at
// M / 1.25, M and 1.25 M: fresh draws of exactly that many features through the production path (tasks/attention.hpp's
// approximate_attention), its own streams, its own quantiles; it shares only the estimator under test (its fit, draw
// and features) and exact attention. Claims per (input, sampler), over the estimators:
//   - the named M is within 1.25x of the smallest M whose simulated 95th percentile meets the target: simulated p95 at
//     M / 1.25 >= target - 4 SE and at 1.25 M <= target + 4 SE (where advise says "unreachable", simulated p95 at the
//     budget >= target - 4 SE);
//   - the predicted p95 at the named M is within 15% of the simulated one: |pred - sim| <= 0.15 sim + 4 SE (both SEs);
//     where the curve ended early because the target is out of reach (tasks/advise.hpp, OutOfReach), its prediction at
//     the budget is an extrapolated lower bound, and the claim is that it holds: bound <= simulated p95 + 4 SE.
// The simulated M (interpolated between the three M in log-log, extrapolated with slope -1/2 outside) is recorded.
#include <cmath>

#include <fmt/format.h>

#include "advise/advise.hpp"

#include "attention/inputs.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "estimators/registry.hpp"
#include "experiment.hpp"
#include "tasks/advise.hpp"
#include "tasks/attention.hpp"

namespace kestrel::experiments {

namespace {

constexpr double kTarget = 0.1, kRelTol = 0.15, kSe = 4.0;

struct Setup {
  arma::uword d, L, dv, rows;
  std::size_t reps;
  arma::uword budget;  // aniso-columns gets twice this (it needs ~5000 features)
};

// Quick: a budget of 1024, so the inputs that need thousands of features are checked as "unreachable" (the simulation
// at the budget must agree), which keeps the quick run, and CI, to about a minute.
Setup setup_of(const Options& opt) {
  return opt.quick ? Setup{16, 64, 8, 64, 40, 1024} : Setup{64, 256, 16, 256, 100, 4096};
}

arma::mat values(const Options& opt, arma::uword L, arma::uword dv, double offset, std::uint64_t index) {
  Rng rng(opt.seed, Stream::Values, index);
  return rng.normal_matrix(L, dv) + offset;
}

arma::mat iso(const Options& opt, arma::uword d, arma::uword L, double scale, std::uint64_t index) {
  Rng rng(opt.seed, Stream::Data, 2000 + index);
  return scale * rng.normal_matrix(d, L);
}

std::vector<AdviseCase> cases(const Options& opt, const Setup& s) {
  std::vector<AdviseCase> c;
  for (const auto& in : attention_inputs(opt, s.d, s.L))
    c.push_back({in.name, in.regime + (in.spectrum == "-" ? "" : " " + in.spectrum), in.Q, in.K,
                 values(opt, s.L, s.dv, 1.0, 1000), s.budget});
  const auto& first = c.front();
  c.push_back({"iso-0.5-zero-mean-v", "iso-0.5 with V ~ N(0, 1)", first.Q, first.K, values(opt, s.L, s.dv, 0.0, 1001),
               s.budget});
  // The anisotropic case: column scales 0.2 .. 1.2, d = 32, L = 128; simulation needs ~5000 features.
  {
    const arma::uword d = 32, L = opt.quick ? 64 : 128;
    arma::vec scale = arma::linspace(0.2, 1.2, d);
    arma::mat Q = iso(opt, d, L, 1.0, 1), K = iso(opt, d, L, 1.0, 2);
    Q.each_col() %= scale;
    K.each_col() %= scale;
    c.push_back({"aniso-columns", "d = 32, column scales 0.2..1.2", Q, K, values(opt, L, 8, 1.0, 1002), 2 * s.budget});
  }
  c.push_back({"iso-d128", "d = 128, entries N(0, 0.36)", iso(opt, 128, 64, 0.6, 3), iso(opt, 128, 64, 0.6, 4),
               values(opt, 64, 8, 1.0, 1003), s.budget});
  c.push_back({"iso-L24", "L = 24, d = 16, entries N(0, 0.36)", iso(opt, 16, 24, 0.6, 5), iso(opt, 16, 24, 0.6, 6),
               values(opt, 24, 4, 1.0, 1004), s.budget});
  {
    const arma::uword L = opt.quick ? 1024 : 4096;
    c.push_back({fmt::format("iso-L{}", L), fmt::format("L = {}, d = 16, entries N(0, 0.36)", L),
                 iso(opt, 16, L, 0.6, 7), iso(opt, 16, L, 0.6, 8), values(opt, L, 4, 1.0, 1005), s.budget});
  }
  return c;
}

// Independent measurement of the rows' error at M: p95 and median over rows of sqrt(mean |Y-hat_i - Y_i|^2) / RMS |Y|,
// each with the SE of the row at that quantile.
struct Measured {
  double p95, p95_se, median;
};

Measured measure(const Estimator& e, const arma::mat& Qr, const arma::mat& K, const arma::mat& V,
                 const ExactAttention& exact, arma::uword M, Sampler sampler, std::size_t reps, std::uint64_t seed) {
  // Fixed chunks of draws in parallel, summed in chunk order: the same for any thread count.
  constexpr std::size_t kChunks = 16;
  std::vector<arma::vec> c1(kChunks, arma::zeros(Qr.n_cols)), c2(kChunks, arma::zeros(Qr.n_cols));
  for_each_block(kChunks, [&](std::size_t c) {
    for (std::size_t r = reps * c / kChunks; r < reps * (c + 1) / kChunks; ++r) {
      Rng rng(seed, Stream::MonteCarlo, 1'000'000 + r);
      const ApproxAttention a = approximate_attention(e, e.draw(M, rng, sampler), Qr, K, V);
      const arma::vec sq = arma::sum(arma::square(a.Y - exact.Y), 1);
      c1[c] += sq;
      c2[c] += arma::square(sq);
    }
  });
  arma::vec s1(Qr.n_cols, arma::fill::zeros), s2(Qr.n_cols, arma::fill::zeros);
  for (std::size_t c = 0; c < kChunks; ++c) s1 += c1[c], s2 += c2[c];
  const double R = static_cast<double>(reps);
  const arma::vec mse = s1 / R, se = arma::sqrt(arma::clamp(s2 / R - arma::square(mse), 0, 1e300) / (R - 1));
  const double rms = std::sqrt(arma::accu(arma::square(exact.Y)) / static_cast<double>(Qr.n_cols));
  const arma::vec err = arma::sqrt(mse) / rms;
  arma::vec err_se = se / (2 * arma::sqrt(mse)) / rms;
  err_se.elem(arma::find(mse == 0)).zeros();
  const arma::vec sorted = arma::sort(err);
  auto q = [&](double p) {
    const double pos = p * static_cast<double>(err.n_elem - 1);
    const auto lo = static_cast<arma::uword>(pos);
    const arma::uword hi = std::min<arma::uword>(lo + 1, err.n_elem - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
  };
  const double p95 = q(0.95);
  return {p95, err_se[arma::index_min(arma::abs(err - p95))], q(0.5)};
}

// Where the p95 crosses the target between (m[k], p[k]) points, log-log; outside them with slope -1/2.
double crossing(const std::vector<double>& m, const std::vector<double>& p) {
  if (p.front() <= kTarget) return m.front() * std::pow(p.front() / kTarget, 2);
  for (std::size_t k = 1; k < m.size(); ++k)
    if (p[k] <= kTarget)
      return std::exp(std::log(m[k - 1]) +
                      std::log(kTarget / p[k - 1]) / std::log(p[k] / p[k - 1]) * std::log(m[k] / m[k - 1]));
  return m.back() * std::pow(p.back() / kTarget, 2);
}

}  // namespace

std::vector<AdviseCase> advise_cases(const Options& opt) { return cases(opt, setup_of(opt)); }

void run_advise(const Options& opt, H5Writer& h5, std::vector<Claim>& claims) {
  run_advise_on(advise_cases(opt), opt, h5, claims);
}

namespace {

// What the independent simulation found for every (input, estimator, sampler) combination, in order.
struct Checks {
  std::vector<std::string> labels;
  std::vector<double> named, named_low, named_high, simulated, predicted, measured, measured_se, lower_ok, upper_ok,
      match_ok;
};

// Per sampler: how many rows were checked and which failed.
struct Tally {
  int n = 0, m_fail = 0, match_fail = 0;
  std::string m_note, match_note;
};

// advise on one input, its report written under /NAME.
Advice advise_case(const AdviseCase& c, const Options& opt, const Setup& s, H5Writer& h5) {
  AdviseOptions o;
  o.budget = c.budget;
  o.seed = opt.seed;
  o.rows = s.rows;
  o.timing = false;
  o.samplers = {Sampler::Iid, Sampler::Orthogonal, Sampler::Simplex};
  const Advice a = advise(c.Q, c.K, c.V, o);
  const std::string g = "/" + c.name;
  h5.group(g);
  h5.attr(g, "kind", c.kind);
  h5.attr(g, "d", static_cast<std::int64_t>(c.Q.n_rows));
  h5.attr(g, "L", static_cast<std::int64_t>(c.Q.n_cols));
  h5.attr(g, "dv", static_cast<std::int64_t>(c.V.n_cols));
  h5.attr(g, "recommendation", a.recommendation);
  h5.write_text(g + "/report.json", to_json(a).dump(2));
  h5.describe(g + "/report.json", "the whole advise report (JSON): per estimator and sampler the predicted curve",
              "text");
  return a;
}

// One row of the report checked against fresh draws at M/1.25, M and 1.25 M (at the budget where unreached).
void check_row(const AdviceRow& r, const AdviseCase& c, const arma::mat& Qr, const ExactAttention& exact,
               const Options& opt, const Setup& s, Checks& out, Tally& t) {
  const Sampler sampler = parse_sampler(r.sampler);
  const auto e = fit_attention_estimator(r.estimator, c.Q, c.K);
  const std::uint64_t seed = opt.seed + 17;
  ++t.n;
  const std::string who = fmt::format("{} ({})", r.estimator, r.sampler);
  out.labels.push_back(c.name + " " + r.estimator + " " + r.sampler);
  bool lower = true, upper = true, match = true;
  double sim_m = 0, pred = r.at_m_p95, meas = 0, meas_se = 0;
  if (r.m_p95) {
    const arma::uword M = r.m_p95, lo = std::max<arma::uword>(1, static_cast<arma::uword>(std::floor(M / 1.25))),
                      hi = static_cast<arma::uword>(std::ceil(M * 1.25));
    std::vector<double> ms, ps;
    for (arma::uword m : {lo, M, hi}) {
      if (!ms.empty() && static_cast<double>(m) <= ms.back()) continue;
      const Measured x = measure(*e, Qr, c.K, c.V, exact, m, sampler, s.reps, seed);
      ms.push_back(static_cast<double>(m));
      ps.push_back(x.p95);
      if (m == lo && lo < M) lower = x.p95 >= kTarget - kSe * x.p95_se;
      if (m == hi) upper = x.p95 <= kTarget + kSe * x.p95_se;
      if (m == M) meas = x.p95, meas_se = x.p95_se;
    }
    sim_m = crossing(ms, ps);
    match = std::abs(pred - meas) <= kRelTol * meas + kSe * std::hypot(meas_se, r.at_m_p95_se);
  } else {
    const Measured x = measure(*e, Qr, c.K, c.V, exact, c.budget, sampler, s.reps, seed);
    meas = x.p95, meas_se = x.p95_se;
    lower = x.p95 >= kTarget - kSe * x.p95_se;
    sim_m = crossing({static_cast<double>(c.budget)}, {x.p95});
    if (r.out_of_reach) {  // the curve ended early: its prediction at the budget is a lower bound, which must hold
      pred = r.out_of_reach->p95_at_budget;
      match = pred <= meas + kSe * meas_se;
    } else {
      pred = r.err_budget_p95;
      match = std::abs(pred - meas) <= kRelTol * meas + kSe * std::hypot(meas_se, r.curve_p95_se.back());
    }
  }
  out.named.push_back(static_cast<double>(r.m_p95));
  out.named_low.push_back(static_cast<double>(r.m_p95_low));
  out.named_high.push_back(static_cast<double>(r.m_p95_high));
  out.simulated.push_back(sim_m);
  out.predicted.push_back(pred);
  out.measured.push_back(meas);
  out.measured_se.push_back(meas_se);
  out.lower_ok.push_back(lower);
  out.upper_ok.push_back(upper);
  out.match_ok.push_back(match);
  if (!(lower && upper)) {
    ++t.m_fail;
    t.m_note += fmt::format(" {}: named {}, simulated {:.0f};", who, r.m_p95 ? std::to_string(r.m_p95) : "none", sim_m);
  }
  if (!match) {
    ++t.match_fail;
    t.match_note += fmt::format(" {}: predicted {:.4f}, simulated {:.4f} +- {:.4f};", who, pred, meas, meas_se);
  }
}

// The two claims per sampler of one input: the named M within 1.25x, the predicted error within 15%.
void add_case_claims(const std::map<std::string, Tally>& tally, const AdviseCase& c, const Advice& a, const Setup& s,
                     std::vector<Claim>& claims) {
  for (const auto& [sampler, t] : tally) {
    const std::string at =
        fmt::format("{} ({}): d = {}, L = {}, dv = {}, {} rows, target 10%, budget {}, {} draws", c.name, c.kind,
                    c.Q.n_rows, c.Q.n_cols, c.V.n_cols, a.sampled_rows.n_elem, c.budget, s.reps);
    claims.push_back(
        {"issue 34 (kestrel advise)",
         fmt::format("the named M is within 1.25x of the simulated M ({} features)", sampler),
         fmt::format("estimators (of {}) whose named M is outside 1.25x of the simulated M, {}", t.n, c.name), "~", 0,
         static_cast<double>(t.m_fail), 0, at,
         "tested per estimator: simulated p95 at M/1.25 >= target - 4 SE and at 1.25 M <= target + 4 "
         "SE (independent draws through approximate_attention)." +
             (t.m_note.empty() ? std::string() : " Outside:" + t.m_note)});
    claims.push_back({"issue 34 (kestrel advise)",
                      fmt::format("the predicted error matches simulation within 15% ({} features)", sampler),
                      fmt::format("estimators (of {}) whose predicted p95 at the named M differs from the simulated "
                                  "by more than 15% + 4 SE, {}",
                                  t.n, c.name),
                      "~", 0, static_cast<double>(t.match_fail), 0, at,
                      "prediction: nested-draw simulation (advise); reference: independent draws at that M (where "
                      "a curve ended out of reach: its extrapolated bound at the budget <= simulated + 4 SE)." +
                          (t.match_note.empty() ? std::string() : " Differ:" + t.match_note)});
  }
}

void write_checks(H5Writer& h5, const Checks& ch, const std::string& input_list) {
  h5.attr("/", "inputs", input_list);
  h5.attr("/", "target", kTarget);
  auto put = [&](const std::string& name, const std::vector<double>& v, const std::string& what) {
    h5.write("/" + name, v);
    h5.describe("/" + name, what, "combination");
  };
  put("m_named", ch.named, "the M advise names for the 10% target (0: unreachable within the budget)");
  put("m_named_low", ch.named_low, "advise's M where its p95 curve - 2 SE reaches the target");
  put("m_named_high", ch.named_high, "advise's M where its p95 curve + 2 SE reaches the target (0: beyond the budget)");
  put("m_simulated", ch.simulated, "the M where the independent simulation's p95 reaches the target (interpolated)");
  put("predicted_p95", ch.predicted,
      "advise's predicted 95th-percentile error at its M (at the budget if unreached; a lower bound where the "
      "curve ended out of reach)");
  put("measured_p95", ch.measured, "independent simulation's 95th-percentile error at that M");
  put("measured_p95_se", ch.measured_se, "standard error of measured_p95 (the row at the percentile)");
  put("m_lower_ok", ch.lower_ok, "1 where the simulated p95 at M/1.25 is above the target - 4 SE");
  put("m_upper_ok", ch.upper_ok, "1 where the simulated p95 at 1.25 M is below the target + 4 SE");
  put("error_match_ok", ch.match_ok,
      "1 where |predicted - measured| <= 15% measured + 4 SE (a curve that ended out of reach: its bound at the budget "
      "<= measured + 4 SE)");
  std::string all;
  for (const auto& l : ch.labels) all += l + "\n";
  h5.write_text("/combinations", all);
  h5.describe("/combinations", "input, estimator, sampler of each combination (one per line)", "text");
}

}  // namespace

void run_advise_on(const std::vector<AdviseCase>& inputs, const Options& opt, H5Writer& h5,
                   std::vector<Claim>& claims) {
  const Setup s = setup_of(opt);
  Checks checks;
  std::string input_list;
  for (const AdviseCase& c : inputs) {
    input_list += (input_list.empty() ? "" : " ") + c.name;
    opt.say(fmt::format("advise: {}", c.name));
    const Advice a = advise_case(c, opt, s, h5);
    const arma::mat Qr = c.Q.cols(a.sampled_rows);
    const ExactAttention exact = exact_attention(Qr, c.K, c.V);
    std::map<std::string, Tally> tally;  // per sampler
    for (const auto& r : a.rows)
      if (r.status == "ok") check_row(r, c, Qr, exact, opt, s, checks, tally[r.sampler]);
    add_case_claims(tally, c, a, s, claims);
  }
  write_checks(h5, checks, input_list);
}

}  // namespace kestrel::experiments
