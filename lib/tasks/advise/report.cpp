// advise's report, written from the column table (columns.cpp): the JSON report (--json, the HDF5 report.json, Python's
// dict), the HDF5 report's per-row datasets and attributes, and the command line's table.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "io/hdf5.hpp"

namespace kestrel {

using advise_steps::row_label;
using advise_steps::work_time;

// A row's JSON: who and its status; for ok rows the note and every JSON column of the table ("a/b" inside object a).
// Rows without range or validation leave them out.
nlohmann::json advise_steps::row_json(const AdviceRow& r, const AdviseOptions& options) {
  nlohmann::json j = {{"estimator", r.estimator}, {"sampler", r.sampler}, {"status", r.status}};
  if (r.status != "ok") {
    j["reason"] = r.reason;
    if (r.layer) j["layer"] = *r.layer, j["head"] = *r.head, j["kv_head"] = *r.kv_head;  // stacked: whose row
    return j;
  }
  if (!r.note.empty()) j["note"] = r.note;
  put_json(j, r, options, advice_columns());
  return j;
}

namespace {

using J = std::optional<nlohmann::json>;
using C = const AdviceCost&;
using O = const AdviseOptions&;
constexpr auto kJson = CostColumn::Json;

// A member of the cost, and one measured on this machine (none when exact attention was not timed).
template <auto M>
J cost(C c, O) {
  return c.*M;
}
template <auto M>
J measured(C c, O) {
  return c.exact_seconds >= 0 ? J(c.*M) : std::nullopt;
}

}  // namespace

const std::vector<CostColumn>& cost_columns() {
  static const std::vector<CostColumn> t = {
      {"causal", "whether the costs are of causal attention (Lq = Lk = L, exact over the L (L + 1) / 2 pairs kept)",
       kJson, cost<&AdviceCost::causal>},
      {"exact_flops", "floating-point operations of exact attention (all query rows)", kJson,
       cost<&AdviceCost::exact_flops>},
      {"exact_bytes", "bytes exact attention moves", kJson, cost<&AdviceCost::exact_bytes>},
      {"exact_state_bytes", "bytes exact attention keeps per head: the keys and values (a decoder's cache), fp32",
       kJson, cost<&AdviceCost::exact_state_bytes>},
      {"m", "the M of the rows that reach the target, ascending", kJson, cost<&AdviceCost::m>},
      {"rf_flops", "per M: floating-point operations of random-feature attention", kJson, cost<&AdviceCost::rf_flops>},
      {"rf_bytes", "per M: bytes it moves", kJson, cost<&AdviceCost::rf_bytes>},
      {"rf_state_bytes", "per M: bytes it keeps per head: the key sums and the projection (M x (dv + 1 + d)), fp32",
       kJson, cost<&AdviceCost::rf_state_bytes>},
      {"crossover_length", "per M: the length above which random features cost fewer operations", kJson,
       cost<&AdviceCost::crossover_length>},
      {"measured_on_this_machine/exact_seconds",
       "exact attention's time on this machine (median of 3; causal: timed unmasked, scaled by (L + 1) / 2L)", kJson,
       measured<&AdviceCost::exact_seconds>},
      {"measured_on_this_machine/rf_seconds", "random-feature attention's time at rf_m (-1: not timed)", kJson,
       measured<&AdviceCost::rf_seconds>},
      {"measured_on_this_machine/rf_estimator", "the estimator timed", kJson, measured<&AdviceCost::timed_estimator>},
      {"measured_on_this_machine/rf_m", "the M it was timed at", kJson, measured<&AdviceCost::timed_m>},
      {"measured_on_this_machine/exact_timed_rows",
       "query rows exact attention was timed on (the time scaled to all rows when fewer)", kJson,
       measured<&AdviceCost::exact_timed_rows>},
      {"measured_on_this_machine/rf_not_timed", "why random features were not timed (their features do not fit)", kJson,
       [](C c, O) -> J { return c.rf_not_timed.empty() ? J() : J(c.rf_not_timed); }},
  };
  return t;
}

namespace {

nlohmann::json cost_json(const AdviceCost& c, const AdviseOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  put_json(j, c, o, cost_columns());
  return j;
}

}  // namespace

nlohmann::json to_json(const Advice& a, const nlohmann::json& options) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : a.rows) rows.push_back(advise_steps::row_json(r, a.options));
  const nlohmann::json cost = cost_json(a.cost, a.options);
  return {{"options", options},
          {"inputs", {{"d", a.d}, {"Lq", a.Lq}, {"Lk", a.Lk}, {"dv", a.dv}}},
          {"values_offset_share", a.offset_share},
          {"quantity", a.quantity_label},
          {"sampled_rows", a.sampled_rows.n_elem},
          {"budget_considered", a.options.budget},  // --budget, or where random features pay (--pays-only)
          {"rows", rows},
          {"best", a.best ? nlohmann::json(row_label(a.rows[*a.best])) : nlohmann::json(nullptr)},
          {"cost", cost},
          {"choice", a.choice},
          {"choice_reason", a.choice_reason},
          {"recommendation", a.recommendation},
          {"sums", a.sums ? advise_steps::sums_json(*a.sums) : nlohmann::json(nullptr)}};
}

std::string advise_steps::pct(double v) { return fmt::format("{:.3g}%", 100 * v); }

// The report's lines are at most kWidth characters: longer text is broken at spaces, continued with an indent.
constexpr std::size_t kWidth = 120;
std::string advise_steps::wrapped(const std::string& text) {
  const std::size_t lead = std::min(text.find_first_not_of(' '), text.size());
  std::string out, line = text.substr(0, lead);
  const std::string indent = line + "  ";
  bool first = true;  // the first word of the line
  for (std::size_t i = lead; i < text.size();) {
    const std::size_t j = std::min(text.find(' ', i), text.size());
    const std::string word = text.substr(i, j - i);
    if (!first && line.size() + 1 + word.size() > kWidth) {
      out += line + '\n';
      line = indent;
      first = true;
    }
    line += (first ? "" : " ") + word;
    first = false;
    i = j + 1;
  }
  return out + line + '\n';
}

namespace {

using advise_steps::pct;
using advise_steps::wrapped;

}  // namespace

void advise_steps::write_rows_table(std::ostream& out, const std::vector<const AdviceRow*>& rows,
                                    const AdviseOptions& o) {
  // The table's columns: those some ok row has (layer and head only for stacked inputs).
  std::vector<const AdviceColumn*> shown;
  for (const auto& c : advice_columns())
    if (c.cell != Cell::None &&
        std::any_of(rows.begin(), rows.end(), [&](const AdviceRow* r) { return r->status == "ok" && c.value(*r, o); }))
      shown.push_back(&c);
  out << fmt::format("{:<22}", "estimator");
  for (const AdviceColumn* c : shown) out << fmt::format(fmt::runtime(c->format), c->header);
  out << (o.validate ? "  measured p95 +- SE" : "") << '\n';
  std::vector<std::string> notes;
  std::map<std::string, std::vector<std::string>> skipped;  // reason -> estimators (samplers) it applies to
  for (const AdviceRow* row : rows) {
    const AdviceRow& r = *row;
    const std::string label = r.sampler == "iid" || r.sampler == "any" ? r.estimator : r.estimator + " " + r.sampler;
    if (r.status != "ok") {
      auto& who = skipped[r.status + ": " + r.reason];
      if (std::find(who.begin(), who.end(), r.estimator) == who.end()) who.push_back(label);
      continue;
    }
    const std::string where = r.head ? fmt::format("layer {} head {}: ", r.layer.value_or(0), *r.head) : "";
    out << fmt::format("{:<22}", label);
    for (const AdviceColumn* c : shown) out << text_cell(*c, r, o);
    if (r.validate_reps)
      out << fmt::format("  {} +- {}{}", pct(r.measured_p95), pct(r.measured_p95_se),
                         r.within_target(o.target) || !r.m_p95 ? "" : "  ABOVE TARGET");
    out << '\n';
    if (r.decision == "not settled" && advise_steps::learned(r))
      notes.push_back(where + fmt::format("{}: not settled with {} fits per M: more fits (--fit-seeds) narrow the "
                                          "interval",
                                          label, r.curve_draws.empty() ? 0.0 : r.curve_draws.front()));
    else if (r.decision == "not settled")
      notes.push_back(where + fmt::format("{}: not settled with {} draws around the answer; about {} ({} of "
                                          "simulation) would settle it (--time-budget)",
                                          label, r.settle_draws, r.draws_to_settle, work_time(r.settle_seconds)));
    if (!r.note.empty()) notes.push_back(where + label + ": " + r.note);
    if (!r.bands.empty()) {  // causal: the error against position
      std::string line = fmt::format("{}: p95 error by position at M = {}:", label, r.position_m);
      for (const auto& b : r.bands) line += fmt::format(" [{},{}) {}", b.lo, b.hi, pct(b.p95));
      notes.push_back(where + line);
    }
    if (!r.from.decision.empty())
      notes.push_back(where +
                      fmt::format("{}: rows from position {}: {} {}", label, o.from_position,
                                  r.from.decision == "M" ? fmt::format("M = {}", r.from.m_p95) : r.from.decision,
                                  fmt::format("(interval {}..{}, p95 {})", r.from.m_p95_low,
                                              r.from.m_p95_high ? std::to_string(r.from.m_p95_high)
                                                                : ">" + std::to_string(o.budget),
                                              pct(r.from.at_m_p95))));
  }
  if (!notes.empty()) out << "notes:\n";
  for (const auto& n : notes) out << wrapped("  " + n);
  if (!skipped.empty()) out << "not compared:\n";
  for (const auto& [why, who] : skipped) out << wrapped(fmt::format("  {}: {}", fmt::join(who, ", "), why));
}

void write_table(std::ostream& out, const Advice& a) {
  const auto& o = a.options;
  out << fmt::format("inputs: d={} Lq={} Lk={} dv={}  scaling={}  kernel={}  target={}  budget={}\n", a.d, a.Lq, a.Lk,
                     a.dv, o.scale_sqrt_d ? "sqrt-d (logits q.k/sqrt(d))" : "none (logits q.k)", o.kernel.name(),
                     pct(o.target), o.budget);
  out << fmt::format("error of {} ({} rows sampled, seed {})\n", a.quantity_label, a.sampled_rows.n_elem, o.seed);
  std::vector<const AdviceRow*> rows;
  for (const auto& r : a.rows) rows.push_back(&r);
  advise_steps::write_rows_table(out, rows, o);
  if (o.quantity == AdviseQuantity::Attention) {
    out << fmt::format("cost at L = {}{}: exact softmax attention {:.3g} GFLOP, moves {:.3g} MB, keeps {:.3g} MB\n",
                       a.Lk, a.cost.causal ? " (causal)" : "", a.cost.exact_flops / 1e9, a.cost.exact_bytes / 1e6,
                       a.cost.exact_state_bytes / 1e6);
    for (std::size_t k = 0; k < a.cost.m.size(); ++k)
      out << fmt::format("  M={}: {:.3g} GFLOP, moves {:.3g} MB, keeps {:.3g} MB (fewer FLOPs for L > {:.0f})\n",
                         a.cost.m[k], a.cost.rf_flops[k] / 1e9, a.cost.rf_bytes[k] / 1e6,
                         a.cost.rf_state_bytes[k] / 1e6, a.cost.crossover_length[k]);
  }
  if (a.cost.exact_seconds >= 0)
    out << wrapped(
        fmt::format("measured on this machine: exact {:.3g} s{}{}, {} (median of 3)", a.cost.exact_seconds,
                    a.cost.exact_timed_rows < a.Lq
                        ? fmt::format(" (timed on {} of the {} query rows, scaled)", a.cost.exact_timed_rows, a.Lq)
                        : std::string(),
                    a.cost.causal ? " (causal: timed unmasked, scaled by the (L + 1) / 2L of pairs kept)" : "",
                    a.cost.rf_not_timed.empty()
                        ? fmt::format("{} M={} {:.3g} s", a.cost.timed_estimator, a.cost.timed_m, a.cost.rf_seconds)
                        : "random features not timed: " + a.cost.rf_not_timed));
  std::size_t fewest = SIZE_MAX, most = 0, simulated = 0;  // draws around the answers of the simulated rows
  for (const auto& r : a.rows)
    if (r.status == "ok" && r.method.rfind("simulated", 0) == 0)
      ++simulated, fewest = std::min(fewest, r.settle_draws), most = std::max(most, r.settle_draws);
  if (simulated)
    out << wrapped(fmt::format(
        "simulated rows: {} nested draws up to M = 128 (32 on curves heading out of reach), then {}..{} draws at "
        "the M around each decision "
        "(control variate D-hat/D - 1; seed {})",
        o.draws, fewest, most, o.seed));
  out << wrapped("recommendation: " + a.recommendation);
  if (a.sums) advise_steps::write_sums_table(out, *a.sums);
}

void write_report(H5Writer& h5, const Advice& a, const nlohmann::json& options) {
  h5.attr("/", "layout",
          "advise/report.json: the whole report (options, per estimator and sampler the predicted error quantiles, "
          "M for the target, numerical range, validation; cost; recommendation); advise/sampled_rows: the query rows; "
          "advise/<estimator>/<sampler>/curve_*: predicted error against M with standard errors and draws, "
          "error_at_1: each sampled row's (or pair's) predicted error at M = 1; advise/sums (--sums): the key sums in "
          "number "
          "formats against the number of keys");
  h5.group("/advise");
  h5.write_text("/advise/report.json", to_json(a, options).dump(2),
                {"the whole report as JSON (see the root attribute layout)", "none (JSON text)"});
  h5.attr("/advise", "recommendation", a.recommendation);
  h5.attr("/advise", "choice", a.choice);
  h5.attr("/advise", "quantity", a.quantity_label);
  h5.attr("/advise", "target", a.options.target);
  h5.write("/advise/sampled_rows", std::vector<std::int64_t>(a.sampled_rows.begin(), a.sampled_rows.end()),
           {"indices (0-based) of the query rows the quantiles are over", "row"});
  if (a.sums) advise_steps::write_sums(h5, *a.sums);
  advise_steps::write_row_groups(h5, "/advise", a.rows, a.options);
}

void advise_steps::write_row_groups(H5Writer& h5, const std::string& root, const std::vector<AdviceRow>& rows,
                                    const AdviseOptions& o) {
  for (const auto& r : rows) {
    if (r.status != "ok") continue;
    const std::string g = root + "/" + r.estimator + "/" + r.sampler;
    h5.group(g);
    write_columns(h5, g, r, o, advice_columns());
    for (const auto& p : r.parameters) {  // a learned row's fitted parameters, named, in their shapes
      const std::string what = fmt::format(
          "fitted parameter {} of the learned map at M = {} (fit seed 0), phi(x) = [exp(W x + b), "
          "exp(-(W x + b))] of the kernel points x (logits x_q . x_k)",
          p.name, r.parameters_m);
      if (p.shape.size() == 2)
        h5.write(g + "/parameter_" + p.name, arma::mat(p.values.data(), p.shape[1], p.shape[0]).t().eval(),
                 {what, "row,column"});
      else
        h5.write(g + "/parameter_" + p.name, p.values, {what, "index"});
    }
  }
}

}  // namespace kestrel
