// The variance study behind `kestrel variance` (CRT section 5.1, DERF section 5.1): for each sigma
// and each of `pairs` set pairs drawn from a regime, fit every estimator on the pair of sets and
// compute the exact variance for all L x L pairs; optionally confirm by Monte Carlo on a subset.
// An estimator that is undefined (by theory) or fails numerically at a sigma is recorded as such in
// its row (status and reason) and the study goes on: one row never takes the others down.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/pairwise.hpp"
#include "core/enum_names.hpp"
#include "core/rng.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"

namespace kestrel {

// What is studied: one kernel entry per pair of points ("pair"), the entries of K-hat V ("kc": rows x columns of V),
// or the attention rows K-hat V / K-hat 1 ("attention": the delta method's MSE per row, attention_variance.hpp).
// V holds one row of `value_dim` values per key, drawn per set pair from the seed: "normal" N(0, 1), "uniform"
// U[0, 1) or "ones".
enum class Quantity { Pair, Kc, Attention };
template <>
struct EnumNames<Quantity> {
  static constexpr std::string_view what = "quantity";
  static constexpr std::array<EnumName<Quantity>, 3> names{
      {{Quantity::Pair, "pair"}, {Quantity::Kc, "kc"}, {Quantity::Attention, "attention"}}};
};
inline std::string to_string(Quantity q) { return name_of(q); }
inline Quantity parse_quantity(const std::string& s) { return parse_enum<Quantity>(s); }
inline const std::vector<std::string> kValueKinds = {"normal", "uniform", "ones"};

struct VarianceStudyOptions {
  std::string regime = "normal";
  std::vector<double> sigmas = {0.5, 1.0};
  arma::uword dim = 64;
  arma::uword points = 1024;  // L
  arma::uword pairs = 5;      // number of (X, Y) set pairs
  std::uint64_t seed = kDefaultSeed;
  std::vector<std::string> estimators = default_study_estimators();  // the registry's default_study families
  Kernel kernel = Kernel::softmax();
  arma::uword features = 1;   // M: reported variances are of the M-feature estimate (Var_1 / M for iid averages)
  std::size_t mc_reps = 0;    // > 0: also run the Monte Carlo simulator
  arma::uword mc_points = 0;  // Monte Carlo on the first mc_points <= L points of each set; 0: min(64, L)
  Sampler sampler = Sampler::Iid;
  RegimeOptions regime_options;  // data directory, image preprocessing, spectrum, clusters, files
  // CRT appendix 9.10.1: a complex feature holds two real numbers, so for a fair comparison real-valued
  // families get twice the features (their variance is halved); the rule is per family, see
  // halved_by_halve_real in estimators/registry.hpp.
  bool halve_real = false;
  Quantity quantity = Quantity::Pair;
  std::string values = "normal";  // kc, attention: how V is drawn (kValueKinds)
  arma::uword value_dim = 1;      // kc, attention: columns of V
};

// The values V (Ly x opt.value_dim) of set pair `set_index` (stream Values of the seed).
arma::mat study_values(const VarianceStudyOptions& opt, arma::uword Ly, std::uint64_t set_index);

void validate(const VarianceStudyOptions& opt);
arma::uword mc_points_used(const VarianceStudyOptions& opt);  // mc_points, or min(64, L) when 0
// What identifies a study's inputs beyond its options (provenance's "inputs", part of a sweep's resume key): the
// regime's inputs (regime_inputs) and this version's --halve-real rule. The options themselves are recorded from their
// table (frontend/study_options.hpp record_study).
nlohmann::json study_inputs(const VarianceStudyOptions& opt);

// Families without an exact variance (Family::exact_variance false: estimators written in Python without
// log_var_over_k2) get an empirical one: per pair, the sample variance of the M-feature estimate over kEmpiricalReps
// Monte Carlo repetitions (the simulator, seed opt.seed mixed with the set pair, opt.sampler), on the first
// mc_points_used(opt) points of each set (--mc-points, default min(64, L)), summarised like the exact variance. Rows
// say so (empirical_reps > 0). For heavy-tailed estimates (PosRF at large norms) a sample variance underestimates
// the true one (GUIDE, traps): read such rows as a lower bound.
inline constexpr std::size_t kEmpiricalReps = 1000;

struct McSummary {
  RunningStats log_var_mc;         // log of the empirical variance (M features), entries with v > 0
  RunningStats log_var_exact;      // exact log variance (M features) on the same entries
  double max_abs_z_mean = 0;       // max |mean - K| / se over entries
  double frac_var_within_3se = 0;  // share of entries with |v_mc - v_exact| < 3 se(v_mc)
  std::uint64_t entries = 0;
  // v_exact is the exact variance of the sampler simulated (--sampler: orthogonal and simplex blocks have theirs,
  // coupled_variance.hpp). True when kestrel has none for it (structured, halton, or a family without an isotropic
  // form): v_exact is then the iid variance, which a coupled sampler's may fall below, so the verdict says so.
  bool iid_reference = false;
  // The sample variance of a heavy-tailed estimate is useless (its standard error rests on a fourth
  // moment the sample cannot estimate): it is trusted only if at least kMcTrustedShare of the entries
  // lie within 3 SE of the exact variance (about 99.7% do for well-behaved tails).
  static constexpr double kMcTrustedShare = 0.9;
  bool trusted() const { return frac_var_within_3se >= kMcTrustedShare; }
};

// What a result row is: "ok"; "exact" (zero variance at every pair, log Var = -inf, counted in
// n_exact); "undefined" (the estimator does not exist here by theory, or has infinite variance);
// "failed" (a numerical failure). Rows that are not "ok" carry a reason and no summary numbers.
enum class Status { Ok = 0, Exact = 1, Undefined = 2, Failed = 3 };
template <>
struct EnumNames<Status> {
  static constexpr std::string_view what = "result status";
  static constexpr std::array<EnumName<Status>, 4> names{
      {{Status::Ok, "ok"}, {Status::Exact, "exact"}, {Status::Undefined, "undefined"}, {Status::Failed, "failed"}}};
};
inline std::string to_string(Status s) { return name_of(s); }
Status parse_status(const std::string& s);  // IoError for a name not in the table (a results file's)

struct VarianceResult {
  std::string estimator;
  Status status = Status::Ok;
  std::string reason;
  arma::uword features = 1;  // M used for this estimator (2 M for real-valued families with halve_real)
  double sigma = 0;
  PairwiseSummary summary;                          // pooled over all set pairs
  std::vector<PairwiseSummary> per_set;             // one per set pair
  nlohmann::json params = nlohmann::json::array();  // fitted parameters per set pair
  std::optional<McSummary> mc;
  std::size_t empirical_reps = 0;  // > 0: the variance is a Monte Carlo estimate (kEmpiricalReps), not exact
};

// True when kestrel has no exact variance for Monte Carlo with `sampler` on this family (structured, halton, or a
// family without an isotropic form drawn in coupled blocks): its verdict then compares with the iid variance.
bool mc_reference_is_iid(const std::string& estimator, Sampler sampler);

using Progress = std::function<void(const std::string&)>;
std::vector<VarianceResult> run_variance_study(const VarianceStudyOptions& opt, const Progress& progress = {});

// One result row as it is printed, written to HDF5 and kept in a sweep's parts: a VarianceResult
// flattened with the grid point (regime, d, L, kernel) it belongs to. Summary numbers are set only when
// status is "ok" ("exact": n_pairs and n_exact); the Monte Carlo block only when it was run.
struct McRow {
  std::size_t reps = 0;
  arma::uword points = 0;
  std::uint64_t entries = 0;
  double mean_log_var = 0, std_log_var = 0, exact_mean_log_var = 0, max_abs_z_mean = 0, frac_var_within_3se = 0;
  bool trusted = false;
  bool operator==(const McRow&) const = default;
};

struct ResultRow {
  std::string estimator;
  std::string quantity = "pair";  // to_string(Quantity)
  Status status = Status::Ok;
  std::string reason;  // empty for ok rows
  std::string regime, kernel;
  double sigma = 0;
  arma::uword dim = 0, points = 0, features = 0;
  nlohmann::json params = nlohmann::json::array();  // fitted parameters per set pair (family-specific)
  std::uint64_t n_pairs = 0, n_exact = 0;
  double mean_log_var = 0, std_log_var = 0, mean_log_rel_var = 0, std_log_rel_var = 0, mean_log_kernel = 0;
  std::vector<double> mean_log_var_per_set;
  std::uint64_t n_flagged = 0;  // attention: rows outside the delta method's range (attention_variance.hpp)
  std::optional<McRow> mc;
  // > 0: the variances are empirical (kEmpiricalReps repetitions on the first empirical_points points of each set).
  std::size_t empirical_reps = 0;
  arma::uword empirical_points = 0;
  bool operator==(const ResultRow&) const = default;
};

ResultRow result_row(const VarianceResult& r, const VarianceStudyOptions& opt);

// The warning lines on the Monte Carlo verdicts of `rows` ("" when every simulation agrees with its reference), for
// `kestrel variance` and `kestrel sweep` alike: the rows whose simulation disagrees with the exact variance of the
// sampler simulated (heavy tails: trust the exact column; attention: the delta method's prediction is off), and apart
// from them the rows that could only be compared with the iid variance (mc_reference_is_iid).
std::string mc_verdict(const std::vector<ResultRow>& rows, Sampler sampler);
// Whether the row's Monte Carlo block was compared with the iid variance, not the simulated sampler's: a pair row
// where mc_reference_is_iid, and kc and attention rows with any other sampler (their predictions are for iid features).
bool mc_compared_with_iid(const ResultRow& r, Sampler sampler);
// The mark of a row whose simulation disagrees with its reference in the CLI tables: " MC UNTRUSTED", " PREDICTION
// OFF" (attention), " MC VS IID EXACT" (mc_compared_with_iid), or "" (trusted, or no Monte Carlo).
const char* mc_mark(const ResultRow& r, Sampler sampler);

// The measured columns of a result row, one line each (result_table.cpp): the HDF5 table writer, the JSON of
// `--json` and of a sweep's checkpoints, its reader and the CLI table all loop over this table, so a new column is
// one line there. The row's keys (estimator, quantity, status, reason, regime, kernel, params, the per-set means)
// are written by each of them directly.
enum class ColumnType { Real, Count, Flag };  // JSON number / unsigned integer / bool; HDF5 float64 / int64 / int64
// Which rows carry the column in JSON (HDF5 writes every row, 0 where it is absent): every row, rows with
// statistics (ok or exact), ok rows, ok rows of quantity attention, ok rows with a Monte Carlo block (key "mc").
enum class ColumnWhen { Always, Counted, Ok, Attention, Mc };
// How the CLI table shows a column: not at all, as "mean +- std" (with the column `spread`), as a number, as a %.
enum class CliFormat { None, MeanStd, Number, Percent };
struct ResultColumn {
  const char* name;   // HDF5 dataset in group/<estimator>/ ("mc_" + name for Monte Carlo columns); "" = JSON only
  const char* json;   // key in JSON (inside "mc" for Monte Carlo columns)
  const char* help;   // the dataset's description
  const char* units;  // "natural log", "count", "share", "1/0", or "" for a scale
  ColumnType type;
  ColumnWhen when;
  double (*real)(const ResultRow&);              // Real columns
  void (*set_real)(ResultRow&, double);          //
  std::uint64_t (*count)(const ResultRow&);      // Count and Flag columns
  void (*set_count)(ResultRow&, std::uint64_t);  //
  CliFormat cli = CliFormat::None;
  const char* cli_header = "";  // "{Var}" and "{K}" stand for the quantity's names (Var/MSE, K/|Y|/|KV|)
  const char* spread = "";      // MeanStd: the JSON key of the standard deviation column
};
const std::vector<ResultColumn>& result_columns();

// The stable keys of `kestrel variance --json` (d and L for dim and points); from_json reads them back
// (a sweep's parts on disk and its resume record).
nlohmann::json to_json(const ResultRow& r);
ResultRow row_from_json(const nlohmann::json& j);
inline nlohmann::json to_json(const VarianceResult& r, const VarianceStudyOptions& opt) {
  return to_json(result_row(r, opt));
}

// Result rows as HDF5 columns (the one table writer of `variance`, `sweep` and the reproductions):
// group/<estimator>/<column>[row], rows are the given rows of that estimator in order, each column with
// its description and axis; rows that are not "ok" hold 0 in the numeric columns and say why in
// `status`/`reason`.
class H5Writer;
void write_table(H5Writer& h5, const std::string& group, const std::vector<ResultRow>& rows,
                 const std::vector<std::string>& estimators);
void write_h5(H5Writer& h5, const std::string& group, const std::vector<VarianceResult>& results,
              const VarianceStudyOptions& opt);

// "N of M results undefined or failed: dark sigma=0.8 (reason); ..." or "" when all are ok/exact.
std::string undefined_summary(const std::vector<ResultRow>& rows);

}  // namespace kestrel
