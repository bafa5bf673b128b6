// The steps of `kestrel advise` (advise.hpp) and what they hand each other, one file each in this folder:
// inputs.cpp (checks, scaling, sampled rows, what the metric divides by), range.cpp (the features' exponents per
// number format), curves.cpp (error curves and the M read off them), predict.cpp (one row's prediction), simulate.cpp
// (simulated curves), kernel_entries.cpp (exact kernel entries), validate.cpp (--validate), cost.cpp (FLOPs, bytes and
// timing), recommend.cpp (the words), report.cpp (the column table, JSON, HDF5, text), sums.cpp (the key sums in number
// formats), advise.cpp (the loop over families and samplers); heads.cpp and heads_report.cpp for stacked heads.
#pragma once
#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <armadillo>

#include "estimators/registry.hpp"
#include "tasks/advise/advise.hpp"
#include "tasks/attention.hpp"

namespace kestrel::advise_steps {

using Say = std::function<void(const std::string&)>;

// One draw of features of the keys and sampled queries above this is not formed (--validate, timing).
inline constexpr double kMaxFeatureBytes = 4e9;

// The inputs as the estimators see them: kernel points (scaled by d^(-1/4) when asked) and, for the attention
// routines that scale themselves, points whose attention_scaled() are those kernel points.
// A simulated row's draws so far (simulate.cpp): kept by the first pass of --time-budget, resumed by the second.
struct SimulatedRun;

struct Inputs {
  arma::mat Qk, Kk;  // kernel points
  arma::mat Qa, Ka;  // attention inputs: attention_scaled(Qa) == Qk
  arma::mat V;       // Lk x dv, or Lk x 1 of ones for the normaliser
  arma::uvec rows;   // sampled query rows
  arma::uvec keys;   // sampled keys (kernel quantity)
  bool normaliser = false;
  arma::vec norm;             // per sampled row: what the metric divides by (one value repeated for the pooled ones)
  arma::uvec positions;       // causal: each sampled row's last key (its position); empty: every key
  double work_allowance = 0;  // the simulation work (kWorkPerSecond) the row being predicted may spend, in all
  // Where the row being predicted keeps its simulated draws; one already there is resumed (null: neither).
  std::shared_ptr<SimulatedRun>* run = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point t0);
// Simulation work in seconds at kWorkPerSecond, in words: "40 s", "3.2 min", "5.1 h", "more than a day".
std::string work_time(double seconds);

// ----- inputs.cpp -----
// The inputs and options checked together (the parser checked each option alone).
void check_inputs(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt);
// The scaled points, sampled rows and keys; fills a's shapes, options, sampled rows and quantity label.
Inputs prepare(Advice& a, const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt);
// Per sampled row, what the metric divides by; and the share of mean |Y_i|^2 that V's mean row makes up.
arma::vec metric_norms(const arma::mat& Y, const Inputs& in, const arma::mat& V, AdviseMetric metric,
                       double& offset_share);
// Exact attention on the sampled rows (causal: row i over keys 0..i, each row alone, the stable log-sum-exp).
ExactAttention exact_rows(const Inputs& in);
// Causal: the position bands of the error against position (0, 16, 64, ... x4, then L): [band_lo, band_hi).
std::vector<std::pair<arma::uword, arma::uword>> position_bands(arma::uword L);
// False (with the row's status and reason) for a family advise cannot predict.
bool applicable(const Family& f, AdviceRow& row);

// ----- range.cpp -----
FeatureRange feature_range(const Estimator& e, const Draw& w, const Inputs& in, const arma::vec& log_norm,
                           const Kernel& k);

// ----- curves.cpp -----
// The q-quantile of v (linear interpolation between order statistics).
double quantile(arma::vec v, double q);
// The SE at that quantile: the SE (of s) of the nearer row of the two that bracket it; their mean midway.
double quantile_se(const arma::vec& v, const arma::vec& s, double q);
// Whether a metric averages squared errors over draws (then the error is the root) or absolute ones.
bool squared(AdviseMetric m);
// Per row: the error and its standard error from the mean over draws of the metric's per-draw quantity and its SE.
std::pair<arma::vec, arma::vec> row_errors(const arma::vec& mean, const arma::vec& se, const arma::vec& norm,
                                           AdviseMetric m);
// 1, 2, 4, ... below the budget, then the budget: the M of exact curves.
std::vector<arma::uword> curve_grid(arma::uword budget);
// Smallest M in [1, budget] with f(M) <= target for f decreasing in M (0 if f(budget) > target).
arma::uword smallest_m(const std::function<double(arma::uword)>& f, double target, arma::uword budget);
// log-log interpolation of a positive curve y(m) at M (linear where a value is 0); the end values outside the grid.
double curve_at(const std::vector<double>& m, const std::vector<double>& y, double M);
// An exact iid curve e(M) = e(1) / sqrt(M) from the rows' errors at M = 1.
void fill_iid_curve(AdviceRow& row, const arma::vec& err1, const AdviseOptions& opt);
// A simulated curve from per-row errors and SEs (rows x grid): quantiles, M for the target (in whole draws of `unit`
// feature columns and whole blocks of `block` columns, 0: none) and its interval, and the decision.
void fill_simulated_curve(AdviceRow& row, const arma::mat& err, const arma::mat& se,
                          const std::vector<arma::uword>& grid, const std::vector<std::size_t>& draws,
                          arma::uword block, const AdviseOptions& opt, arma::uword unit = 1);
// The decision on a row's filled curve (curve_m, curve_median, curve_p95 with curve_p95_se): M for the target and its
// interval where the curve -+ 2 SE crosses it, "out of reach" where the curve ends at the budget (at_budget) with its
// p95 - 2 SE above the target, else "not settled" (AdviceRow::decision).
void decide_on_curve(AdviceRow& row, arma::uword block, bool at_budget, const AdviseOptions& opt, arma::uword unit = 1);

// ----- simulate.cpp -----
// Where the 95th percentile at the budget is heading, from the last settle round's draws and p95 and this round's: the
// change since then carried on as if it were a bias shrinking as 1/draws, p + (p - p_before) / (n / n_before - 1)
// (the 95th percentile over rows of noisy per-row errors lies above theirs, by less as draws come; heavy draws not
// yet seen pull it the other way); p itself after fewer than 16 draws or where the draws grew less than 1.5x.
double heading_p95(double n_before, double p_before, double n, double p);
// Attention rows (or normalisers) of any sampler, simulated on the sampled rows with nested draws, then settled.
void predict_simulated(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact,
                       Sampler sampler, bool control_variate, const AdviseOptions& opt);

// ----- predict.cpp -----
// advise's M counts real feature columns, the width of the linear-attention product: FeatureMap::columns_per_draw per
// drawn object (4 for hrf-cluster, 2 for pos-hyp, 1 for most), so a row's M is a whole number of draws. columns_unit
// is that number (1 for the hybrids whose columns are not linear in the draws: their M counts draws, said in their
// note); draw_columns draws M columns (M a multiple of it).
arma::uword columns_unit(const Estimator& e);
// The budget in whole draws: --budget rounded down to a multiple of columns_unit (Undefined below one draw).
arma::uword row_budget(const Estimator& e, const AdviseOptions& opt);
Draw draw_columns(const Estimator& e, arma::uword M, Rng& rng, Sampler sampler);
// One (estimator, sampler) row: the prediction, its finiteness, the feature range at its M and the validation.
void predict_row(AdviceRow& row, const Family& f, const Estimator& e, const std::optional<ThreePointForm>& form,
                 const Inputs& in, const ExactAttention& exact, const arma::vec& log_norm, Sampler sampler,
                 const AdviseOptions& opt, const Say& say);

// ----- kernel_entries.cpp -----
// Kernel entries on the grid rows x keys, with a per-M error function.
void predict_kernel(AdviceRow& row, const Estimator& e, const Inputs& in, Sampler sampler, const AdviseOptions& opt);

// ----- validate.cpp -----
// --validate: R fresh draws at the row's M through the production code, the measured error next to the prediction.
void validate_row(AdviceRow& row, const Estimator& e, const Inputs& in, const ExactAttention& exact, Sampler sampler,
                  const AdviseOptions& opt, const Say& say);

// ----- cost.cpp -----
// FLOPs of exact attention over Lq queries and Lk keys (causal: Lq = Lk, the L (L + 1) / 2 pairs a mask keeps) and of
// random-feature attention at M features (causal or not); the L above which random features at M cost fewer FLOPs
// when Lq = Lk = L: 2M, causal 4M - 1.
double exact_attention_flops(double Lq, double Lk, double d, double dv, bool causal);
double rf_attention_flops(double Lq, double Lk, double d, double dv, double M);
double crossover_length(double M, bool causal);
// The largest M whose random-feature attention costs fewer FLOPs than exact attention at Lq, Lk (at least 1): the
// budget of --pays-only.
arma::uword paying_budget(double Lq, double Lk, double d, double dv, bool causal);
// The FLOPs and memory of exact and random-feature attention at every M some row needs.
void attention_costs(Advice& a);
// Exact and random-feature attention timed on this machine (the best row's estimator at its M), median of 3.
void time_attention(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted, const Say& say);

// ----- recommend.cpp -----
std::string row_label(const AdviceRow& r);
// A learned row (learned.hpp): fitted, not drawn; its SE is over fits.
inline bool learned(const AdviceRow& r) { return r.sampler == "learned"; }
// What the row's map is, as Advice::choice names it: "learned features" or "random features".
inline const char* features_kind(const AdviceRow& r) { return learned(r) ? "learned features" : "random features"; }
// The best row, the cost (timed where asked) and the recommendation in words.
void cost_and_recommendation(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted,
                             const Say& say);

// ----- report.cpp -----
// A row's JSON from the column table.
nlohmann::json row_json(const AdviceRow& r, const AdviseOptions& options);
// Text broken at spaces into lines of at most 120 characters; a percentage.
std::string wrapped(const std::string& text);
std::string pct(double v);
// The command line's table of rows (a column no ok row has is left out), their notes and the rows not compared.
void write_rows_table(std::ostream& out, const std::vector<const AdviceRow*>& rows, const AdviseOptions& o);
// Per ok row the HDF5 group root/<estimator>/<sampler> with its dataset and attribute columns.
void write_row_groups(H5Writer& h5, const std::string& root, const std::vector<AdviceRow>& rows,
                      const AdviseOptions& o);

// ----- sums.cpp -----
// --sums needs values (InvalidArgument otherwise).
void check_sums(const arma::mat& V, const AdviseOptions& opt);
// The recommended row's key sums in each format of --sums (SumsReport in advise.hpp).
void emulate_sums(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted, const Say& say);
nlohmann::json sums_json(const SumsReport& s);
void write_sums_table(std::ostream& out, const SumsReport& s);
void write_sums(H5Writer& h5, const SumsReport& s, const std::string& root = "/advise");

}  // namespace kestrel::advise_steps
