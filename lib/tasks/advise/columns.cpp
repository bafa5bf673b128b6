// The columns of an advice row (AdviceColumn in advise.hpp, a Column of io/record.hpp): the one table that the JSON
// report, the HDF5 report's per-row datasets and attributes, and the command line's table are written from.
#include "tasks/advise/steps.hpp"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kestrel {

bool AdviceRow::within_target(double target) const {
  return validate_reps == 0 || measured_p95 - 3 * measured_p95_se <= target;
}

namespace {

using J = std::optional<nlohmann::json>;
using Row = const AdviceRow&;
using Opt = const AdviseOptions&;

nlohmann::json count_or_null(arma::uword v) { return v ? nlohmann::json(v) : nlohmann::json(nullptr); }

// A simulated curve ends past the answer unless --full-curve: no error at the budget then.
bool at_budget(Row r, Opt o) { return !r.curve_m.empty() && r.curve_m.back() == static_cast<double>(o.budget); }

// The fp16 verdicts without and with the stabiliser, shortened to "ok" or what fails ("overflow / ok").
std::string fp16_summary(Row r) {
  if (!r.range) return "-";
  auto word = [](const std::string& v) { return v == "ok" || v == "n/a" ? v : v.substr(0, v.find(':')); };
  for (std::size_t k = 0; k < number_formats().size(); ++k)
    if (number_formats()[k].name == "fp16")
      return word(r.range->verdict[k].first) + " / " + word(r.range->verdict[k].second);
  return "-";
}

J formats_json(const FeatureRange& range) {
  nlohmann::json v;
  const auto& f = number_formats();
  for (std::size_t k = 0; k < f.size(); ++k)
    v[f[k].name] = {{"raw", range.verdict[k].first}, {"stabilised", range.verdict[k].second}};
  return v;
}

// Readers of a row's member, of its feature range and validation (nullopt where the row has none).
template <auto M>
J field(Row r, Opt) {
  return r.*M;
}
template <auto M>
J range_field(Row r, Opt) {
  return r.range ? J((*r.range).*M) : std::nullopt;
}
template <auto M>
J stacked(Row r, Opt) {
  return r.*M ? J(*(r.*M)) : std::nullopt;
}
template <auto M>
J validated(Row r, Opt) {
  return r.validate_reps ? J(r.*M) : std::nullopt;
}

// Builders of the table's entries: where a column goes (JSON, an HDF5 dataset or attribute of the row's group, the
// command line's table) and how its value is read off a row.
constexpr auto kJson = AdviceColumn::Json, kDataset = AdviceColumn::Dataset, kAttr = AdviceColumn::Attribute;
AdviceColumn col(const char* key, const char* help, int where, AdviceColumn::Value value, const char* axis = "") {
  return {.key = key, .help = help, .where = where, .value = value, .axis = axis};
}
AdviceColumn shown(AdviceColumn c, Cell how, const char* format, const char* header) {
  c.cell = how;
  c.format = format;
  c.header = header;
  return c;
}

}  // namespace

const std::vector<AdviceColumn>& advice_columns() {
  // Order: the HDF5 writing order (datasets, then attributes) and the table's column order.
  static const std::vector<AdviceColumn> t = {
      // Stacked inputs ([layers, heads, L, d], tasks/advise/heads.hpp): which head the row is of (absent for 2-D).
      shown(
          col("layer", "the layer of the row's query head (stacked inputs [layers, heads, L, d]; 0 for [heads, L, d])",
              kJson | kAttr, stacked<&AdviceRow::layer>),
          Cell::Text, " {:>5}", "layer"),
      shown(col("head", "the row's query head (stacked inputs)", kJson | kAttr, stacked<&AdviceRow::head>), Cell::Text,
            " {:>4}", "head"),
      col("kv_head",
          "the key/value head the query head reads (stacked inputs; grouped-query attention: head / (query heads / "
          "kv heads))",
          kJson | kAttr, stacked<&AdviceRow::kv_head>),
      col("curve/m", "number of features M", kJson | kDataset, field<&AdviceRow::curve_m>, "m"),
      col("curve/median", "predicted median relative error over the sampled rows (pairs)", kJson | kDataset,
          field<&AdviceRow::curve_median>, "m"),
      col("curve/p95", "predicted 95th-percentile relative error over the sampled rows (pairs)", kJson | kDataset,
          field<&AdviceRow::curve_p95>, "m"),
      col("curve/median_se", "standard error of curve_median (0 where exact)", kJson | kDataset,
          field<&AdviceRow::curve_median_se>, "m"),
      col("curve/p95_se", "standard error of curve_p95 (that of the row at the percentile; 0 where exact)",
          kJson | kDataset, field<&AdviceRow::curve_p95_se>, "m"),
      col("curve/draws", "nested draws behind each simulated point (0 where exact)", kJson | kDataset,
          field<&AdviceRow::curve_draws>, "m"),
      col(
          "learned/train_p95",
          "learned rows: the 95th-percentile error on the rows the map was fitted on (mean over fits), per M",
          kJson | kDataset, [](Row r, Opt) -> J { return r.curve_train_p95.empty() ? J() : J(r.curve_train_p95); },
          "m"),
      col(
          "learned/fit_seconds", "learned rows: the seconds of one fit, per M (mean over fits; wall time)",
          kJson | kDataset, [](Row r, Opt) -> J { return r.curve_fit_seconds.empty() ? J() : J(r.curve_fit_seconds); },
          "m"),
      col("learned/parameters",
          "learned rows: the fitted parameters' names, shapes and values (row-major; in HDF5 the datasets "
          "parameter_NAME of the row's group, in their shapes). The map phi(x) = [exp(W x + b), exp(-(W x + b))] acts "
          "on the kernel points x = q / d^(1/4) (scaling sqrt-d) or x = q (scaling none): the points whose dot "
          "products are the logits",
          kJson,
          [](Row r, Opt) -> J {
            if (r.parameters.empty()) return std::nullopt;
            nlohmann::json j = nlohmann::json::array();
            for (const auto& p : r.parameters)
              j.push_back({{"name", p.name}, {"shape", p.shape}, {"values", p.values}});
            return j;
          }),
      col("learned/held_out_sequences", "learned rows: the sequences (0-based) the held parameters were judged on",
          kJson, [](Row r, Opt) -> J { return r.parameters.empty() ? J() : J(r.held_out_sequences); }),
      col("learned/parameters_held_out_p95",
          "learned rows: the held parameters' own 95th-percentile error on those sequences (the curve is the mean over "
          "fits)",
          kJson | kAttr, [](Row r, Opt) -> J { return r.parameters.empty() ? J() : J(r.parameters_held_out_p95); }),
      col("learned/parameters_m", "learned rows: the M whose fitted parameters (fit seed 0) the report holds",
          kJson | kAttr, [](Row r, Opt) -> J { return r.parameters.empty() ? J() : J(r.parameters_m); }),
      col(
          "error_at_1",
          "predicted error at M = 1 of each sampled query row (attention; rows in /advise/sampled_rows) or (query, "
          "key) pair (kernel); exact iid rows: the error at M is this / sqrt(M)",
          kDataset,
          [](Row r, Opt) -> J {
            return r.err1_each.is_empty() ? J() : J(std::vector<double>(r.err1_each.begin(), r.err1_each.end()));
          },
          "row"),
      shown(col("method", "what gave the numbers: exact, exact (coupled) or simulated (draws, seed)", kJson | kAttr,
                field<&AdviceRow::method>),
            Cell::FirstWord, " {:<9}", "method"),
      col("log_rel_var_median", "median over sampled (query, key) pairs of log(Var/K^2) at M = 1", kJson,
          field<&AdviceRow::log_rel_var_median>),
      col("log_rel_var_p95", "95th percentile over sampled pairs of log(Var/K^2) at M = 1", kJson,
          field<&AdviceRow::log_rel_var_p95>),
      col("error_at_1_median", "predicted median error at M = 1 (null: a learned row, its curve from its grid's M)",
          kJson, [](Row r, Opt) -> J { return advise_steps::learned(r) ? J() : J(r.err1_median); }),
      col("error_at_1_p95", "predicted 95th-percentile error at M = 1 (null: a learned row)", kJson,
          [](Row r, Opt) -> J { return advise_steps::learned(r) ? J() : J(r.err1_p95); }),
      col("m_for_target_median", "smallest M whose predicted median error meets the target (null: none)", kJson,
          [](Row r, Opt) -> J { return count_or_null(r.m_median); }),
      col("m_for_target_p95",
          "the M named for the target: the smallest whose predicted 95th-percentile error meets it, in whole blocks "
          "for orthogonal and simplex features (JSON null, HDF5 0: none, see decision)",
          kJson | kAttr, [](Row r, Opt) -> J { return count_or_null(r.m_p95); }),
      col("decision",
          "M (m_for_target_p95 is named, its interval at most 1.5x wide), out of reach (at the budget the 95th "
          "percentile - 2 SE is above the target) or not settled (settling it would take more than its share of "
          "--time-budget, or --max-draws; see settle_seconds)",
          kJson | kAttr, field<&AdviceRow::decision>),
      shown(col("answer", "the table's answer: the M named, or the decision", 0,
                [](Row r, Opt) -> J { return r.decision == "M" ? std::to_string(r.m_p95) : r.decision; }),
            Cell::Text, " {:>12}", "M p95"),
      shown(col("interval", "the table's interval: where the p95 curve -+ 2 SE meet the target", 0,
                [](Row r, Opt o) -> J {
                  if (r.method.rfind("exact", 0) == 0) return std::string("exact");
                  if (r.decision == "out of reach") return std::string("-");
                  const auto m = [&](arma::uword v) { return v ? std::to_string(v) : ">" + std::to_string(o.budget); };
                  return m(r.m_p95_low) + ".." + m(r.m_p95_high);
                }),
            Cell::Text, "  {:<14}", "interval"),
      col("error_at_m_median", "predicted median error at m_for_target_p95 (at the budget where that is null)", kJson,
          field<&AdviceRow::at_m_median>),
      shown(col("error_at_m_p95", "predicted 95th-percentile error at m_for_target_p95 (at the budget where null)",
                kJson, field<&AdviceRow::at_m_p95>),
            Cell::Percent, " {:>9}", "e(M) p95"),
      col("error_at_m_p95_se", "standard error of error_at_m_p95 (0 where exact)", kJson,
          field<&AdviceRow::at_m_p95_se>),
      col("error_at_budget_median", "predicted median error at the budget (null: the curve ended before it)", kJson,
          [](Row r, Opt o) -> J { return at_budget(r, o) ? nlohmann::json(r.err_budget_median) : nullptr; }),
      col("error_at_budget_p95", "predicted 95th-percentile error at the budget (null: the curve ended before it)",
          kJson, [](Row r, Opt o) -> J { return at_budget(r, o) ? nlohmann::json(r.err_budget_p95) : nullptr; }),
      col("curve_end_m", "the largest M of the curve", kJson,
          [](Row r, Opt) -> J {
            return r.curve_m.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.curve_m.back());
          }),
      col("m_for_target_p95_interval",
          "[low, high]: where the 95th-percentile curve - 2 SE and + 2 SE meet the target (null: not within the "
          "budget)",
          kJson,
          [](Row r, Opt) -> J {
            return nlohmann::json::array({count_or_null(r.m_p95_low), count_or_null(r.m_p95_high)});
          }),
      col("settle_draws", "simulated rows: the draws behind the grid points around the decision (0 where exact)",
          kJson | kAttr, field<&AdviceRow::settle_draws>),
      col("draws_to_settle", "not settled: about how many draws there would settle it (0 otherwise)", kJson | kAttr,
          field<&AdviceRow::draws_to_settle>),
      col("work_seconds",
          "simulated rows: the simulation work spent, in seconds at the stated rate (kWorkPerSecond multiply-adds a "
          "second; counted, not timed, so the same on every machine)",
          kJson | kAttr, field<&AdviceRow::work_seconds>),
      col("settle_seconds",
          "not settled: about how much simulation work would settle it, in seconds at the same rate (0 otherwise; "
          "--time-budget gives each simulated row at least its equal share)",
          kJson | kAttr, field<&AdviceRow::settle_seconds>),
      col("variance_reduction",
          "the control variate's variance reduction of the rows' squared errors at the decision (plain / reduced "
          "variance, median over the rows at or above the 90th percentile; 1 where none)",
          kJson | kAttr, field<&AdviceRow::variance_reduction>),
      // range: one draw's features at the row's M (the budget where none), FeatureRange in advise.hpp.
      col("range/stabilisable", "positive features: log-features exist and the stabiliser applies", kJson,
          range_field<&FeatureRange::stabilisable>),
      col("range/query_max", "largest log |feature| of the sampled queries", kJson,
          range_field<&FeatureRange::query_max>),
      col("range/query_min", "smallest log |feature| (not 0) of the sampled queries", kJson,
          range_field<&FeatureRange::query_min>),
      col("range/key_max", "largest log |feature| of the keys", kJson, range_field<&FeatureRange::key_max>),
      col("range/key_min", "smallest log |feature| (not 0) of the keys", kJson, range_field<&FeatureRange::key_min>),
      col("range/key_sum_max", "largest log of a key sum S^T 1", kJson, range_field<&FeatureRange::key_sum_max>),
      col("range/row_max_min", "smallest over query rows of the row's largest log-feature", kJson,
          range_field<&FeatureRange::row_max_min>),
      col("range/stabilised_query_min", "stabilised: smallest query log-feature", kJson,
          range_field<&FeatureRange::s_query_min>),
      col("range/stabilised_key_min", "stabilised: smallest key log-feature", kJson,
          range_field<&FeatureRange::s_key_min>),
      col("range/stabilised_key_sum_max", "stabilised: largest log key sum", kJson,
          range_field<&FeatureRange::s_key_sum_max>),
      col("range/formats", "per number format (fp32, bf16, fp16): raw and stabilised, ok or what fails", kJson,
          [](Row r, Opt) -> J { return r.range ? formats_json(*r.range) : std::nullopt; }),
      // validation: --validate R, measured at m_for_target_p95 with fresh draws.
      col("validation/draws", "--validate: independent draws measured", kJson, validated<&AdviceRow::validate_reps>),
      col("validation/m", "--validate: the M measured at", kJson, validated<&AdviceRow::validate_m>),
      col("validation/measured_median", "--validate: measured median error over the sampled rows", kJson,
          validated<&AdviceRow::measured_median>),
      col("validation/measured_p95", "--validate: measured 95th-percentile error", kJson,
          validated<&AdviceRow::measured_p95>),
      col("validation/measured_p95_se", "--validate: standard error of the row at the measured 95th percentile", kJson,
          validated<&AdviceRow::measured_p95_se>),
      col("validation/within_target", "--validate: measured p95 - 3 SE <= target", kJson,
          [](Row r, Opt o) -> J { return r.validate_reps ? J(r.within_target(o.target)) : std::nullopt; }),
      // causal: the error against position and the decision over the rows from --from-position (absent otherwise).
      col(
          "causal/position", "causal: the position of each sampled query row (it attends to keys 0..position)",
          kJson | kDataset,
          [](Row r, Opt) -> J {
            if (r.positions.is_empty()) return std::nullopt;
            return std::vector<double>(r.positions.begin(), r.positions.end());
          },
          "row"),
      col(
          "causal/error_at_m",
          "causal: each sampled row's predicted error (the metric's relative units) at the M causal_m",
          kJson | kDataset,
          [](Row r, Opt) -> J {
            if (r.positions.is_empty()) return std::nullopt;
            return std::vector<double>(r.err_at_m_each.begin(), r.err_at_m_each.end());
          },
          "row"),
      col("causal/m", "causal: the grid M of causal/error_at_m (the first at or above the named M, else the last)",
          kJson | kAttr, [](Row r, Opt) -> J { return r.positions.is_empty() ? J() : J(r.position_m); }),
      col("causal/bands",
          "causal: per band of positions [lo, hi) the sampled rows in it and their median and 95th-percentile error "
          "at the decision's M",
          kJson,
          [](Row r, Opt) -> J {
            if (r.positions.is_empty()) return std::nullopt;
            nlohmann::json b = nlohmann::json::array();
            for (const auto& x : r.bands)
              b.push_back({{"lo", x.lo}, {"hi", x.hi}, {"rows", x.rows}, {"median", x.median}, {"p95", x.p95}});
            return b;
          }),
      col("from/decision",
          "--from-position: the decision over the sampled rows at positions >= it (M, out of reach or not settled), "
          "from the same draws",
          kJson | kAttr, [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(r.from.decision); }),
      col("from/m_for_target_p95", "--from-position: the M named over those rows (JSON null, HDF5 0: none)",
          kJson | kAttr,
          [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(count_or_null(r.from.m_p95)); }),
      col("from/m_for_target_p95_interval", "--from-position: [low, high] of that M (null: not within the budget)",
          kJson,
          [](Row r, Opt) -> J {
            if (r.from.decision.empty()) return std::nullopt;
            return nlohmann::json::array({count_or_null(r.from.m_p95_low), count_or_null(r.from.m_p95_high)});
          }),
      col("from/error_at_m_p95", "--from-position: their 95th-percentile error at that M (at the budget where null)",
          kJson, [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(r.from.at_m_p95); }),
      col("from/error_at_m_p95_se", "--from-position: its standard error", kJson,
          [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(r.from.at_m_p95_se); }),
      col(
          "from/curve_p95", "--from-position: their 95th-percentile error at each curve M", kJson | kDataset,
          [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(r.from.curve_p95); }, "m"),
      col(
          "from/curve_p95_se", "--from-position: standard error of from_curve_p95", kJson | kDataset,
          [](Row r, Opt) -> J { return r.from.decision.empty() ? J() : J(r.from.curve_p95_se); }, "m"),
      shown(col("fp16", "fp16 without / with the stabiliser (the table's summary of range/formats)", 0,
                [](Row r, Opt) -> J { return fp16_summary(r); }),
            Cell::Text, "  {:<19}", "fp16 raw / stab."),
  };
  return t;
}

}  // namespace kestrel
