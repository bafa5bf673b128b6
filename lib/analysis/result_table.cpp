// The variance study's results as one table of columns (variance_study.hpp ResultColumn): a result's row, the column
// table that JSON (--json, a sweep's parts), the HDF5 datasets and the command line's table are written from, and the
// table writer of `variance`, `sweep` and the reproductions.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "analysis/variance_study.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "io/hdf5.hpp"

namespace kestrel {

ResultRow result_row(const VarianceResult& r, const VarianceStudyOptions& opt) {
  ResultRow row{.estimator = r.estimator,
                .quantity = to_string(opt.quantity),
                .status = r.status,
                .reason = r.status == Status::Ok ? "" : r.reason,
                .regime = opt.regime,
                .kernel = opt.kernel.name(),
                .sigma = r.sigma,
                .dim = opt.dim,
                .points = opt.points,
                .features = r.features,
                .params = r.params,
                .empirical_reps = r.empirical_reps,
                .empirical_points = r.empirical_reps ? mc_points_used(opt) : 0};
  if (r.status == Status::Ok || r.status == Status::Exact) {
    row.n_pairs = static_cast<std::uint64_t>(r.summary.log_kernel.n);
    row.n_exact = r.summary.n_exact;
  }
  if (r.status != Status::Ok) return row;
  row.mean_log_var = r.summary.log_var.mean;
  row.std_log_var = r.summary.log_var.stddev();
  row.mean_log_rel_var = r.summary.log_rel_var.mean;
  row.std_log_rel_var = r.summary.log_rel_var.stddev();
  row.mean_log_kernel = r.summary.log_kernel.mean;
  for (const auto& s : r.per_set) row.mean_log_var_per_set.push_back(s.log_var.mean);
  row.n_flagged = r.summary.n_flagged;
  if (r.mc)
    row.mc = McRow{.reps = opt.mc_reps,
                   .points = mc_points_used(opt),
                   .entries = r.mc->entries,
                   .mean_log_var = r.mc->log_var_mc.mean,
                   .std_log_var = r.mc->log_var_mc.stddev(),
                   .exact_mean_log_var = r.mc->log_var_exact.mean,
                   .max_abs_z_mean = r.mc->max_abs_z_mean,
                   .frac_var_within_3se = r.mc->frac_var_within_3se,
                   .trusted = r.mc->trusted()};
  return row;
}

namespace {

// Accessors of one field of ResultRow or of its Monte Carlo block McRow, generated from the member pointer.
template <class C, class T>
C class_of(T C::*);
template <auto F>
auto& field(ResultRow& r) {
  if constexpr (std::is_same_v<decltype(class_of(F)), McRow>) {
    if (!r.mc) r.mc.emplace();
    return (*r.mc).*F;
  } else {
    return r.*F;
  }
}
template <auto F>
auto field_value(const ResultRow& r) {
  if constexpr (std::is_same_v<decltype(class_of(F)), McRow>)
    return r.mc ? (*r.mc).*F : decltype((*r.mc).*F){};
  else
    return r.*F;
}
template <auto F>
ResultColumn real(const char* name, const char* json, const char* help, const char* units, ColumnWhen when) {
  return {name,
          json,
          help,
          units,
          ColumnType::Real,
          when,
          [](const ResultRow& r) { return static_cast<double>(field_value<F>(r)); },
          [](ResultRow& r, double v) { field<F>(r) = v; },
          nullptr,
          nullptr};
}
template <auto F>
ResultColumn count(const char* name, const char* json, const char* help, const char* units, ColumnWhen when,
                   ColumnType type = ColumnType::Count) {
  using T = std::remove_reference_t<decltype(field<F>(std::declval<ResultRow&>()))>;
  return {name,
          json,
          help,
          units,
          type,
          when,
          nullptr,
          nullptr,
          [](const ResultRow& r) { return static_cast<std::uint64_t>(field_value<F>(r)); },
          [](ResultRow& r, std::uint64_t v) { field<F>(r) = static_cast<T>(v); }};
}
ResultColumn shown(ResultColumn c, CliFormat f, const char* header, const char* spread = "") {
  c.cli = f, c.cli_header = header, c.spread = spread;
  return c;
}

bool carries(const ResultColumn& c, const ResultRow& r) {
  switch (c.when) {
    case ColumnWhen::Always:
      return true;
    case ColumnWhen::Counted:
      return r.status == Status::Ok || r.status == Status::Exact;
    case ColumnWhen::Ok:
      return r.status == Status::Ok;
    case ColumnWhen::Attention:
      return r.status == Status::Ok && r.quantity == "attention";
    case ColumnWhen::Mc:
      return r.status == Status::Ok && r.mc.has_value();
  }
  return false;
}

nlohmann::json column_json(const ResultColumn& c, const ResultRow& r) {
  if (c.type == ColumnType::Real) return c.real(r);
  if (c.type == ColumnType::Flag) return c.count(r) != 0;
  return c.count(r);
}

void column_from_json(const ResultColumn& c, ResultRow& r, const nlohmann::json& j, bool required) {
  if (!required && !j.contains(c.json)) return;
  const nlohmann::json& v = j.at(c.json);
  if (c.type == ColumnType::Real)
    c.set_real(r, v.get<double>());
  else if (c.type == ColumnType::Flag)
    c.set_count(r, v.get<bool>());
  else
    c.set_count(r, v.get<std::uint64_t>());
}

}  // namespace

// The one table of measured columns. Order: HDF5 writing order (the Monte Carlo columns after the per-set means).
const std::vector<ResultColumn>& result_columns() {
  using C = ColumnWhen;
  static const std::vector<ResultColumn> t = {
      real<&ResultRow::sigma>("sigma", "sigma", "scale sigma of the inputs", "", C::Always),
      shown(real<&ResultRow::mean_log_var>(
                "mean_log_var", "mean_log_var",
                "mean over pairs of log Var of the M-feature estimate (natural log; exact pairs left out)",
                "natural log", C::Ok),
            CliFormat::MeanStd, "log {Var}", "std_log_var"),
      real<&ResultRow::std_log_var>("std_log_var", "std_log_var", "standard deviation over pairs of log Var",
                                    "natural log", C::Ok),
      shown(real<&ResultRow::mean_log_rel_var>("mean_log_rel_var", "mean_log_rel_var",
                                               "mean over pairs of log(Var/K) (DERF 5.1)", "natural log", C::Ok),
            CliFormat::MeanStd, "log({Var}/{K})", "std_log_rel_var"),
      real<&ResultRow::std_log_rel_var>("std_log_rel_var", "std_log_rel_var",
                                        "standard deviation over pairs of log(Var/K)", "natural log", C::Ok),
      real<&ResultRow::mean_log_kernel>("mean_log_kernel", "mean_log_kernel", "mean over pairs of log K", "natural log",
                                        C::Ok),
      count<&ResultRow::dim>("dim", "d", "dimension d", "count", C::Always),
      count<&ResultRow::points>("points", "L", "points per set L", "count", C::Always),
      count<&ResultRow::features>("features", "features",
                                  "features M of this estimator (2M for real-valued families with halve-real)", "count",
                                  C::Always),
      count<&ResultRow::n_pairs>("n_pairs", "n_pairs", "point pairs summarised", "count", C::Counted),
      count<&ResultRow::n_exact>("n_exact", "n_exact",
                                 "pairs with zero variance (log Var = -inf), left out of the means", "count",
                                 C::Counted),
      count<&ResultRow::n_flagged>(
          "n_flagged", "n_flagged",
          "quantity attention: rows outside the delta method's range (normaliser's relative variance > 0.01, or "
          "the prediction above the bound every draw obeys); 0 for the other quantities",
          "count", C::Attention),
      count<&McRow::reps>("", "reps", "Monte Carlo repetitions", "count", C::Mc),
      count<&McRow::points>("", "points", "Monte Carlo: points of each set simulated", "count", C::Mc),
      count<&McRow::entries>("", "entries", "Monte Carlo: entries compared", "count", C::Mc),
      shown(real<&McRow::mean_log_var>("mean_log_var", "mean_log_var",
                                       "Monte Carlo: mean log of the empirical variance", "natural log", C::Mc),
            CliFormat::Number, "MC log Var"),
      real<&McRow::std_log_var>("", "std_log_var", "Monte Carlo: standard deviation of the log empirical variance",
                                "natural log", C::Mc),
      shown(
          real<&McRow::exact_mean_log_var>("exact_mean_log_var", "exact_mean_log_var",
                                           "Monte Carlo: exact mean log Var on the same entries", "natural log", C::Mc),
          CliFormat::Number, "exact(sub)"),
      real<&McRow::max_abs_z_mean>("max_abs_z_mean", "max_abs_z_mean",
                                   "Monte Carlo: max over entries of |mean - K| / SE", "", C::Mc),
      shown(real<&McRow::frac_var_within_3se>(
                "frac_var_within_3se", "frac_var_within_3se",
                "Monte Carlo: share of entries whose empirical variance is within 3 SE of the exact", "share", C::Mc),
            CliFormat::Percent, "in 3se"),
      count<&McRow::trusted>("trusted", "trusted", "", "1/0", C::Mc, ColumnType::Flag),
  };
  return t;
}

nlohmann::json to_json(const ResultRow& r) {
  nlohmann::json j = {
      {"estimator", r.estimator}, {"quantity", r.quantity}, {"status", to_string(r.status)},
      {"regime", r.regime},       {"kernel", r.kernel},     {"params", r.params},
  };
  if (r.status != Status::Ok) j["reason"] = r.reason;
  if (r.empirical_reps) {
    j["variance"] = "empirical";
    j["empirical_reps"] = r.empirical_reps;
    j["empirical_points"] = r.empirical_points;
  }
  if (r.status == Status::Ok) j["mean_log_var_per_set"] = r.mean_log_var_per_set;
  for (const auto& c : result_columns())
    if (carries(c, r)) (c.when == ColumnWhen::Mc ? j["mc"][c.json] : j[c.json]) = column_json(c, r);
  return j;
}

ResultRow row_from_json(const nlohmann::json& j) {
  ResultRow r{.estimator = j.at("estimator").get<std::string>(),
              .quantity = j.value("quantity", "pair"),
              .status = parse_status(j.at("status").get<std::string>()),
              .reason = j.value("reason", ""),
              .regime = j.at("regime").get<std::string>(),
              .kernel = j.at("kernel").get<std::string>(),
              .params = j.at("params"),
              .empirical_reps = j.value<std::size_t>("empirical_reps", 0),
              .empirical_points = j.value<arma::uword>("empirical_points", 0)};
  if (r.status == Status::Ok) r.mean_log_var_per_set = j.at("mean_log_var_per_set").get<std::vector<double>>();
  for (const auto& c : result_columns()) {
    if (c.when == ColumnWhen::Mc) {
      if (r.status == Status::Ok && j.contains("mc")) column_from_json(c, r, j["mc"], true);
    } else {
      // Present when the row carries it (the attention flag count is optional: older checkpoints lack it).
      const bool required = c.when == ColumnWhen::Always || (c.when == ColumnWhen::Ok && r.status == Status::Ok);
      if (c.when == ColumnWhen::Always || c.when == ColumnWhen::Counted || r.status == Status::Ok)
        column_from_json(c, r, j, required);
    }
  }
  return r;
}

std::string undefined_summary(const std::vector<ResultRow>& rows) {
  std::size_t bad = 0;
  std::string shown;
  for (const auto& r : rows) {
    if (r.status == Status::Ok || r.status == Status::Exact) continue;
    if (++bad <= 5)
      shown += fmt::format("{}{} {} at d={} L={} M={} sigma={:g}: {}", bad > 1 ? "; " : "", r.estimator,
                           to_string(r.status), r.dim, r.points, r.features, r.sigma, r.reason);
  }
  if (bad == 0) return "";
  return fmt::format(
      "{} of {} results undefined or failed (recorded with their reason; the others are complete): "
      "{}{}",
      bad, rows.size(), shown, bad > 5 ? fmt::format("; and {} more", bad - 5) : "");
}

namespace {
std::string quantity_description(const std::string& q) {
  if (q == "kc")
    return "kc: the summarised entries are the rows x columns of K-hat V (V: options.values, options.value_dim); "
           "'pairs' are those entries, Var is Var((K-hat V)_ia), K is |(K V)_ia|";
  if (q == "attention")
    return "attention: the summarised entries are the rows of Y-hat = K-hat V / K-hat 1; 'pairs' are rows, Var is the "
           "delta method's MSE E|Y-hat_i - Y_i|^2 (analysis/attention_variance.hpp), K is |Y_i|";
  return "pair: the summarised entries are the point pairs (x_i, y_j); Var is Var(K-hat(x_i, y_j)), K is K(x_i, y_j)";
}
}  // namespace

namespace {

// One column of the table as an HDF5 dataset over the rows of one estimator.
void write_column(H5Writer& h5, const std::string& g, const ResultColumn& c,
                  const std::vector<const ResultRow*>& rows) {
  const std::string zero_note = "; 0 in rows whose status is not ok";
  const std::string path = g + "/" + (c.when == ColumnWhen::Mc ? "mc_" : "") + c.name;
  const H5Writer::Meaning meaning{
      c.type == ColumnType::Flag  // mc_trusted: its threshold in the description
          ? fmt::format("1 if the empirical variance can be trusted (>= {:g}% of entries within 3 SE), 0 if heavy "
                        "tails make it useless",
                        100 * McSummary::kMcTrustedShare)
          : std::string(c.help) + (c.type == ColumnType::Real && c.when != ColumnWhen::Always ? zero_note : ""),
      "row"};
  if (c.type == ColumnType::Real) {
    std::vector<double> v;
    for (const auto* r : rows) v.push_back(c.real(*r));
    h5.write(path, v, meaning);
  } else {
    std::vector<std::int64_t> v;
    for (const auto* r : rows) v.push_back(static_cast<std::int64_t>(c.count(*r)));
    h5.write(path, v, meaning);
  }
}

// The row keys that are not plain columns: status, reason, params and the per-set means.
void write_keys(H5Writer& h5, const std::string& g, const std::vector<const ResultRow*>& mine) {
  std::vector<std::int64_t> status;
  nlohmann::json reason = nlohmann::json::array(), params = nlohmann::json::array();
  std::size_t sets = 0;
  for (const auto* r : mine) {
    status.push_back(static_cast<std::int64_t>(r->status));
    reason.push_back(r->reason);
    params.push_back(r->params);
    sets = std::max(sets, r->mean_log_var_per_set.size());
  }
  h5.write(g + "/status", status,
           {"0 ok, 1 exact (zero variance at every pair), 2 undefined, 3 failed; see reason", "row"});
  h5.write_text(g + "/reason", reason.dump(), {"JSON list: why a row is not ok (empty for ok rows)", "row"});
  h5.write_text(g + "/params", params.dump(),
                {"JSON list: fitted parameters of each set pair, per row", "row,set_pair"});
  arma::mat per_set(mine.size(), sets, arma::fill::zeros);
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (std::size_t p = 0; p < mine[i]->mean_log_var_per_set.size(); ++p)
      per_set(i, p) = mine[i]->mean_log_var_per_set[p];
  h5.write(g + "/per_set_mean_log_var", per_set,
           {"mean over the pairs of one set pair of log Var; 0 in rows whose status "
            "is not ok",
            "row,set_pair"});
}

}  // namespace

void write_table(H5Writer& h5, const std::string& group, const std::vector<ResultRow>& rows,
                 const std::vector<std::string>& estimators) {
  for (const auto& name : estimators) {
    std::vector<const ResultRow*> mine;
    for (const auto& r : rows)
      if (r.estimator == name) mine.push_back(&r);
    const std::string g = group + "/" + name;
    h5.group(g);
    h5.attr(g, "rows", "one row per grid point (dim, points, features, sigma) of this estimator");
    if (!mine.empty()) h5.attr(g, "quantity", quantity_description(mine.front()->quantity));
    if (!mine.empty() && mine.front()->empirical_reps)
      h5.attr(g, "variance",
              fmt::format("empirical: no exact variance; sample variance of {} Monte Carlo repetitions on the first {} "
                          "points of each set",
                          mine.front()->empirical_reps, mine.front()->empirical_points));
    for (const auto& c : result_columns())
      if (*c.name && c.when != ColumnWhen::Mc) write_column(h5, g, c, mine);
    write_keys(h5, g, mine);
    if (std::none_of(mine.begin(), mine.end(), [](const auto* r) { return r->mc.has_value(); })) continue;
    for (const auto& c : result_columns())
      if (*c.name && c.when == ColumnWhen::Mc) write_column(h5, g, c, mine);
  }
}

void write_h5(H5Writer& h5, const std::string& group, const std::vector<VarianceResult>& results,
              const VarianceStudyOptions& opt) {
  std::vector<ResultRow> rows;
  for (const auto& r : results) rows.push_back(result_row(r, opt));
  write_table(h5, group, rows, opt.estimators);
}

}  // namespace kestrel
