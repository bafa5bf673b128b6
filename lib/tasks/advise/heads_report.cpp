// The report of `kestrel advise` over heads and layers (heads.hpp): JSON, the command line's table and the HDF5 file,
// each head's rows written with the single-head writers (report.cpp).
#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/hdf5.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/advise/steps.hpp"

namespace kestrel {

namespace {

using J = std::optional<nlohmann::json>;
using S = const HeadsSummary&;
using A = const HeadsAdvice&;
constexpr auto kJson = SummaryColumn::Json, kAttr = SummaryColumn::Attribute;

std::string answer(const std::string& decision, arma::uword m) {
  return decision == "M" ? std::to_string(m) : decision;
}
J ok_only(S s, const nlohmann::json& v) { return s.status == "ok" ? J(v) : std::nullopt; }
nlohmann::json count_or_null(arma::uword m) { return m ? nlohmann::json(m) : nlohmann::json(nullptr); }

}  // namespace

const std::vector<SummaryColumn>& summary_columns() {
  // Order: the table's columns. HDF5 attributes of /advise/summary/<estimator>/<sampler> (ok rows; a null M as 0).
  static const std::vector<SummaryColumn> t = {
      {"estimator", "the estimator", kJson, [](S s, A) -> J { return s.estimator; }},
      {"sampler", "its sampler", kJson, [](S s, A) -> J { return s.sampler; }},
      {"status", "ok, or what some head's row is (not applicable, failed)", kJson,
       [](S s, A) -> J { return s.status; }},
      {"reason", "not ok: why (the first such head named)", kJson,
       [](S s, A) -> J { return s.status == "ok" ? J() : J(s.reason); }},
      {.key = "label",
       .help = "the table's name of the row: the estimator, and its sampler unless iid",
       .value = [](S s, A) -> J { return s.sampler == "iid" ? s.estimator : s.estimator + " " + s.sampler; },
       .cell = Cell::Text,
       .format = "{:<22}",
       .header = "estimator"},
      {"decision_every_head", "M (every head has its M named), else out of reach if any head is, else not settled",
       kJson | kAttr, [](S s, A) -> J { return ok_only(s, s.decision_every); }},
      {"m_for_target_every_head", "the largest M named over the heads (JSON null, HDF5 0: not every head named one)",
       kJson | kAttr, [](S s, A) -> J { return ok_only(s, count_or_null(s.m_every)); }},
      {.key = "every",
       .help = "the table's answer on every head",
       .value = [](S s, A) -> J { return answer(s.decision_every, s.m_every); },
       .cell = Cell::Text,
       .format = " {:>14}",
       .header = "every head"},
      {"decision_median_head", "the decision of the median head (heads ordered by their M)", kJson | kAttr,
       [](S s, A) -> J { return ok_only(s, s.decision_median); }},
      {"m_for_target_median_head",
       "the smallest M that meets the target on at least half of the heads (JSON null, HDF5 0: none)", kJson | kAttr,
       [](S s, A) -> J { return ok_only(s, count_or_null(s.m_median)); }},
      {.key = "median",
       .help = "the table's answer on the median head",
       .value = [](S s, A) -> J { return answer(s.decision_median, s.m_median); },
       .cell = Cell::Text,
       .format = " {:>14}",
       .header = "median head"},
      {"heads_named", "heads whose decision is M", kJson, [](S s, A) -> J { return ok_only(s, s.heads_named); }},
      {.key = "named",
       .help = "the table's heads named of all",
       .value = [](S s, A a) -> J { return fmt::format("{}/{}", s.heads_named, a.heads.size()); },
       .cell = Cell::Text,
       .format = " {:>12}",
       .header = "heads named"},
      {"pays_from_length",
       "M for every head: the length L above which it costs fewer FLOPs than exact attention (null: none named)",
       kJson | kAttr,
       [](S s, A) -> J {
         return ok_only(s, s.m_every ? nlohmann::json(s.pays_from_length) : nlohmann::json(nullptr));
       }},
      {.key = "pays",
       .help = "the table's length from which the M for every head costs fewer FLOPs than exact attention",
       .value = [](S s, A) -> J { return s.m_every ? fmt::format("L > {:.0f}", s.pays_from_length) : "-"; },
       .cell = Cell::Text,
       .format = " {:>14}",
       .header = "fewer FLOPs"},
      {"m_for_target_each_head", "per head (layer-major) the M named, 0 where none", kJson,
       [](S s, A) -> J { return s.m_each; }},
      {"decision_each_head", "per head (layer-major) its decision", kJson, [](S s, A) -> J { return s.decision_each; }},
  };
  return t;
}

nlohmann::json to_json(const HeadsAdvice& a, const nlohmann::json& options) {
  nlohmann::json rows = nlohmann::json::array(), heads = nlohmann::json::array();
  for (const auto& h : a.heads) {
    for (const auto& r : h.advice.rows) rows.push_back(advise_steps::row_json(r, a.options));
    nlohmann::json j = to_json(h.advice, nullptr);  // the head's own report without its rows (they are in rows above)
    j.erase("rows");
    j.erase("options");
    j["layer"] = h.layer, j["head"] = h.head, j["kv_head"] = h.kv_head, j["seed"] = h.seed;
    heads.push_back(std::move(j));
  }
  return heads_json(a, options, std::move(rows), std::move(heads));
}

nlohmann::json heads_json(const HeadsAdvice& a, const nlohmann::json& options, nlohmann::json rows,
                          nlohmann::json heads) {
  nlohmann::json summary = nlohmann::json::array();
  const Advice& first = a.heads.front().advice;
  for (const auto& s : a.summary) {
    nlohmann::json j = nlohmann::json::object();
    put_json(j, s, a, summary_columns());
    summary.push_back(std::move(j));
  }
  nlohmann::json out = {
      {"options", options},
      {"inputs",
       {{"layers", a.layers},
        {"query_heads", a.q_heads},
        {"kv_heads", a.kv_heads},
        {"layered", a.layered},
        {"grouped_query", a.grouped_query.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.grouped_query)},
        {"d", first.d},
        {"Lq", first.Lq},
        {"Lk", first.Lk},
        {"dv", first.dv}}},
      {"quantity", first.quantity_label},
      {"budget_considered", a.options.budget},  // --budget, or where random features pay (--pays-only)
      {"rows", rows},
      {"summary", summary},
      {"best", a.best ? nlohmann::json(summary_label(a.summary[*a.best])) : nlohmann::json(nullptr)},
      {"choice", a.choice},
      {"recommendation", a.recommendation},
      {"heads", heads}};
  if (a.shard) out["shard"] = {{"index", a.shard->index}, {"count", a.shard->count}, {"layers", a.shard_layers}};
  return out;
}

void write_table(std::ostream& out, const HeadsAdvice& a) {
  using advise_steps::pct;
  const auto& o = a.options;
  const Advice& first = a.heads.front().advice;
  out << fmt::format(
      "inputs: {} layers x {} query heads, {} key/value heads; per head d={} Lq={} Lk={} dv={}  "
      "scaling={}  target={}  budget={}\n",
      a.layers, a.q_heads, a.kv_heads, first.d, first.Lq, first.Lk, first.dv, o.scale_sqrt_d ? "sqrt-d" : "none",
      pct(o.target), o.budget);
  if (!a.grouped_query.empty()) out << a.grouped_query << '\n';
  out << fmt::format("error of {} ({} rows sampled per head; seed {} for layer 0 head 0, derived per head)\n",
                     first.quantity_label, first.sampled_rows.n_elem, o.seed);
  std::vector<const AdviceRow*> rows;
  for (const auto& h : a.heads)
    for (const auto& r : h.advice.rows) rows.push_back(&r);
  advise_steps::write_rows_table(out, rows, o);
  write_summary_table(out, a);
  for (const auto& h : a.heads)  // --sums: each head's key sums in the number formats
    if (h.advice.sums) {
      out << fmt::format("layer {} head {}:\n", h.layer, h.head);
      advise_steps::write_sums_table(out, *h.advice.sums);
    }
}

void write_summary_table(std::ostream& out, const HeadsAdvice& a) {
  using advise_steps::pct;
  const auto& o = a.options;
  const Advice& first = a.heads.front().advice;
  out << fmt::format("summary over the {} heads: the M for the target (p95) on every head and on the median head\n",
                     a.heads.size());
  for (const auto& c : summary_columns())
    if (c.cell != Cell::None) out << fmt::format(fmt::runtime(c.format), c.header);
  out << '\n';
  for (const auto& s : a.summary) {
    if (s.status != "ok") continue;
    for (const auto& c : summary_columns())
      if (c.cell != Cell::None) out << text_cell(c, s, a);
    out << '\n';
  }
  for (const auto& s : a.summary)
    if (s.status != "ok")
      out << advise_steps::wrapped(fmt::format("  {} {}: {}: {}", s.estimator, s.sampler, s.status, s.reason));
  const AdviceCost& cost = first.cost;
  if (o.quantity == AdviseQuantity::Attention)
    out << fmt::format(
        "cost per head at L = {}{}: exact softmax attention {:.3g} GFLOP, keeps {:.3g} MB of keys and "
        "values\n",
        first.Lk, cost.causal ? " (causal)" : "", cost.exact_flops / 1e9, cost.exact_state_bytes / 1e6);
  if (cost.exact_seconds >= 0)
    out << advise_steps::wrapped(fmt::format(
        "measured on this machine (layer 0 head 0): exact {:.3g} s{} per head (median of 3)", cost.exact_seconds,
        cost.rf_not_timed.empty()
            ? fmt::format(", {} M={} {:.3g} s", cost.timed_estimator, cost.timed_m, cost.rf_seconds)
            : ", random features not timed: " + cost.rf_not_timed));
  out << advise_steps::wrapped("recommendation: " + a.recommendation);
}

void write_report(H5Writer& h5, const HeadsAdvice& a, const nlohmann::json& options) {
  write_summary_report(h5, a, to_json(a, options));
  for (const auto& h : a.heads) {
    const std::string g = fmt::format("/advise/layer{}/head{}", h.layer, h.head);
    h5.group(g);
    h5.attr(g, "seed", h.seed);
    h5.attr(g, "kv_head", static_cast<std::int64_t>(h.kv_head));
    h5.attr(g, "recommendation", h.advice.recommendation);
    h5.attr(g, "choice", h.advice.choice);
    const auto& rows = h.advice.sampled_rows;
    h5.write(g + "/sampled_rows", std::vector<std::int64_t>(rows.begin(), rows.end()),
             {"indices (0-based) of the head's query rows the quantiles are over", "row"});
    advise_steps::write_row_groups(h5, g, h.advice.rows, a.options);
    if (h.advice.sums) advise_steps::write_sums(h5, *h.advice.sums, g);
  }
}

void write_summary_report(H5Writer& h5, const HeadsAdvice& a, const nlohmann::json& report) {
  h5.attr("/", "layout",
          "advise/report.json: the whole report (options, inputs with layers and heads, every head's rows, the summary "
          "per estimator and sampler over the heads, each head's cost and recommendation); advise/summary/<estimator>/"
          "<sampler>: the M for the target on every head and the median head, m_per_head (layer x head); "
          "advise/m_needed: that of the recommended estimator and sampler; advise/layer<l>/head<h>/: each head's "
          "sampled_rows, <estimator>/<sampler> groups and sums (--sums) as a single-head report has them");
  h5.group("/advise");
  h5.write_text("/advise/report.json", report.dump(2),
                {"the whole report as JSON (see the root attribute layout)", "none (JSON text)"});
  h5.attr("/advise", "recommendation", a.recommendation);
  h5.attr("/advise", "choice", a.choice);
  h5.attr("/advise", "target", a.options.target);
  h5.attr("/advise", "layers", static_cast<std::int64_t>(a.layers));
  h5.attr("/advise", "query_heads", static_cast<std::int64_t>(a.q_heads));
  h5.attr("/advise", "kv_heads", static_cast<std::int64_t>(a.kv_heads));
  const auto per_head = [&](const HeadsSummary& s) {
    arma::mat m(a.layers, a.q_heads);
    for (std::size_t i = 0; i < s.m_each.size(); ++i)
      m(i / a.q_heads, i % a.q_heads) = static_cast<double>(s.m_each[i]);
    return m;
  };
  if (a.best) {
    const auto& s = a.summary[*a.best];
    h5.write("/advise/m_needed", per_head(s),
             {"the M that meets the target (95th percentile) per head for the recommended " + summary_label(s) +
                  " (0: none named, see report.json)",
              "layer,head"});
  }
  for (const auto& s : a.summary) {
    if (s.status != "ok") continue;
    const std::string g = "/advise/summary/" + s.estimator + "/" + s.sampler;
    h5.group(g);
    write_columns(h5, g, s, a, summary_columns());
    h5.write(g + "/m_per_head", per_head(s),
             {"the M that meets the target (95th percentile) per head (0: none named)", "layer,head"});
  }
}

}  // namespace kestrel
