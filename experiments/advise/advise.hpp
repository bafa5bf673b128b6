// `kestrel reproduce advise` (advise.cpp): the inputs it checks `kestrel advise` on, the independent measurement and
// the check of one advise row (tests/advise_test.cpp runs them on a fast subset and on rows with a wrong M).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <armadillo>

#include "experiment.hpp"
#include "sampling/omega.hpp"
#include "tasks/advise/advise.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/attention.hpp"

namespace kestrel::experiments {

struct AdviseCase {
  std::string name, kind;
  arma::mat Q, K, V;  // d x L, d x L, L x dv
  arma::uword budget;
  bool causal = false;  // query i attends to keys 0..i (advise --causal; the checks mask as a decoder does)
};

// The inputs at the run's sizes (quick or paper).
std::vector<AdviseCase> advise_cases(const Options& opt);

// A multi-head input (advise over heads, tasks/advise/heads.hpp): advised once as a stack, each query head's decisions
// then checked as those of an input of its own (its Q, its key/value head's K and V).
struct AdviseStack {
  std::string name, kind;
  HeadStack heads;
  arma::uword budget;
  bool causal = false;
};
std::vector<AdviseStack> advise_stacks(const Options& opt);

// The 95th percentile over rows of sqrt(mean |Y-hat_i - Y_i|^2) / RMS |Y| at m features from fresh draws, drawn in
// batches until it has its power (powered()) or `cap` draws (m = 0: not measured). Causal (positions given, one per
// row of Qr): row r attends to keys 0..positions(r), through approximate_causal_attention. rms: what the errors are
// relative to (0: the RMS of exact's rows; check_advice_row gives a causal input's RMS over every position).
struct AdviseMeasurement {
  arma::uword m = 0;
  double p95 = 0, se = 0;
  std::size_t draws = 0;
  // The slope of -log p95 against log M that the power is for: 1/2 (the M^(-1/2) law), or the flatter slope that the
  // two checks of a decision measure between them (at least 0.05).
  double slope = 0.5;
  double needed_se() const;  // (1 - 1.25^(-slope)) target / z_0.95
  // se <= needed_se(), or p95 -+ z_0.95 se beyond target x 1.25^(+-slope) (the side would not change were M a further
  // 1.25x off)
  bool powered() const;
  double power() const;  // Phi((1 - 1.25^(-slope)) target / se): an error a 1.25x step of M from the target seen on
                         // its side (0: not measured)
};
double advise_needed_se();  // (1 - 1.25^(-1/2)) target / z_0.95 = 0.00642 for the 10% target

AdviseMeasurement measure_powered(const Estimator& e, const arma::mat& Qr, const arma::mat& K, const arma::mat& V,
                                  const ExactAttention& exact, arma::uword m, Sampler sampler, std::size_t cap,
                                  std::uint64_t seed, double slope = 0.5, const arma::uvec& positions = {},
                                  double rms = 0);

// One advise row checked by independent measurements: where the target must be missed (`missed`) and met (`met`).
struct AdviseCheck {
  std::string decision;  // the row's: "M", "out of reach", "not settled"
  AdviseMeasurement missed, met;
  double pred_missed = 0, pred_missed_se = 0, pred_met = 0, pred_met_se = 0;  // advise's curve there (0: none)
  std::string outcome;                                                        // "confirmed", "differs", "underpowered"
  double m_simulated = 0;  // the independent M (log-log between the checks; slope -1/2 beyond them)
  int failed() const;      // checks not passed: on the wrong side or underpowered
};

// Qr: the rows advise sampled; exact: exact attention on them (causal: exact_causal_attention at their positions);
// cap: draws at most per measurement; positions: the sampled rows' positions when c.causal.
AdviseCheck check_advice_row(const AdviceRow& r, const AdviseCase& c, const arma::mat& Qr, const ExactAttention& exact,
                             std::size_t cap, std::uint64_t seed, const arma::uvec& positions = {});

// The checks' noise floor. Were advise's curve the truth at a checked M, the check would measure about N(pred, se^2)
// and land on the wrong side of the target with probability Phi((target - pred) / se) (where it must be missed) or
// Phi((pred - target) / se) (where it must be met): wrong_side_probability (none where the check is not counted: no
// check, not on advise's curve, without its power, or se = 0). Over the counted checks the number on the wrong side is
// then a sum of independent Bernoullis (Poisson-binomial); noise_floor compares the number seen with it.
std::optional<double> wrong_side_probability(const AdviseMeasurement& x, double pred, bool want_missed);
// P(X >= k) for X the number of successes of independent Bernoulli(p_j) (exact, by recursion over the p_j).
double poisson_binomial_at_least(const std::vector<double>& p, int k);
struct NoiseFloor {
  int checks = 0, wrong = 0;    // counted checks, and those of them on the wrong side
  double expected = 0, sd = 0;  // sum p_j, sqrt(sum p_j (1 - p_j))
  double p_at_least = 1;        // P(X >= wrong) were every curve the truth
};
// checks: per counted check, its wrong_side_probability and whether it landed on the wrong side.
NoiseFloor noise_floor(const std::vector<std::pair<double, bool>>& checks);

// The reproduction on `inputs` and `stacks`: per input (per head of a stack) the advise report, the independent
// measurements and the claims.
void run_advise_on(const std::vector<AdviseCase>& inputs, const Options& opt, H5Writer& h5, std::vector<Claim>& claims,
                   const std::vector<AdviseStack>& stacks = {});

}  // namespace kestrel::experiments
