// `kestrel advise merge`: the report of a whole stack of heads from the parts that job-array tasks wrote (advise_heads
// with a LayerShard, `kestrel advise --shard K/N`). Heads share nothing (each its own inputs and head_seed), so the
// heads' rows and reports are the parts' as written, and the summary over the heads is computed again from each head's
// decisions, M, choice and exact-attention cost, by the same summarise_heads that a one-process run calls.
#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "tasks/advise/heads.hpp"

namespace kestrel {

namespace {

using J = nlohmann::json;

// A head as the summary reads it (heads.hpp summarise_heads): who, its shapes, choice, exact-attention cost and the
// rows' status, decision and M. `rows`: its rows' JSON.
HeadAdvice summary_head(const J& head, const std::vector<const J*>& rows, const AdviseOptions& options) {
  HeadAdvice h;
  h.layer = head.at("layer"), h.head = head.at("head"), h.kv_head = head.at("kv_head"), h.seed = head.at("seed");
  Advice& a = h.advice;
  a.options = options;
  const J& in = head.at("inputs");
  a.d = in.at("d"), a.Lq = in.at("Lq"), a.Lk = in.at("Lk"), a.dv = in.at("dv");
  a.quantity_label = head.at("quantity");
  a.choice = head.at("choice"), a.recommendation = head.at("recommendation");
  const J& c = head.at("cost");
  if (c.contains("exact_flops")) {
    a.cost.causal = c.at("causal"), a.cost.exact_flops = c.at("exact_flops");
    a.cost.exact_state_bytes = c.at("exact_state_bytes");
  }
  if (c.contains("measured_on_this_machine")) {
    const J& m = c.at("measured_on_this_machine");
    a.cost.exact_seconds = m.at("exact_seconds"), a.cost.rf_seconds = m.at("rf_seconds");
    a.cost.timed_estimator = m.value("rf_estimator", ""), a.cost.timed_m = m.value("rf_m", arma::uword{0});
    a.cost.rf_not_timed = m.value("rf_not_timed", "");
  }
  for (const J* r : rows) {
    AdviceRow row;
    row.estimator = r->at("estimator"), row.sampler = r->at("sampler"), row.status = r->at("status");
    row.reason = r->value("reason", "");
    row.decision = r->value("decision", "M");
    const J m = r->value("m_for_target_p95", J());
    row.m_p95 = m.is_null() ? 0 : m.get<arma::uword>();
    row.layer = h.layer, row.head = h.head, row.kv_head = h.kv_head;
    a.rows.push_back(std::move(row));
  }
  return h;
}

// Every part is of the same run: the same options, inputs (shapes and heads), quantity and budget as the first.
void check_same_run(const std::vector<J>& parts, const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < parts.size(); ++i) {
    require(parts[i].contains("shard") && parts[i].contains("heads") && parts[i].contains("rows"),
            "{}: not a part of a split `kestrel advise` (no shard, heads and rows in its report.json)", names[i]);
    for (const char* key : {"options", "inputs", "quantity", "budget_considered"})
      require(parts[i].at(key) == parts[0].at(key),
              "{} and {} differ in their {}: parts of different runs; run every part with the same inputs and "
              "options, then merge",
              names[0], names[i], key);
  }
}

}  // namespace

MergedHeads merge_heads(const std::vector<J>& parts, const std::vector<std::string>& names,
                        const AdviseOptions& options) {
  require(!parts.empty(), "no parts to merge: run `kestrel advise --shard K/N --out OUT.h5` for every K first");
  check_same_run(parts, names);
  const J& inputs = parts[0].at("inputs");
  const arma::uword layers = inputs.at("layers"), q_heads = inputs.at("query_heads");
  // Each head's report and rows, from the first part that has its layer (parts of different splits may overlap: the
  // same head gives the same report in each).
  std::vector<const J*> head(layers * q_heads, nullptr);
  std::vector<std::vector<const J*>> rows(head.size());
  std::vector<std::size_t> from(layers, parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    for (arma::uword l : parts[p].at("shard").at("layers").get<std::vector<arma::uword>>())
      if (l < layers && from[l] == parts.size()) from[l] = p;
    for (const J& h : parts[p].at("heads")) {
      const arma::uword l = h.at("layer"), i = l * q_heads + h.at("head").get<arma::uword>();
      if (l < layers && from[l] == p) head[i] = &h;
    }
    for (const J& r : parts[p].at("rows")) {
      const arma::uword l = r.at("layer"), i = l * q_heads + r.at("head").get<arma::uword>();
      if (l < layers && from[l] == p) rows[i].push_back(&r);
    }
  }
  std::vector<arma::uword> missing;
  for (arma::uword l = 0; l < layers; ++l)
    if (from[l] == parts.size()) missing.push_back(l);
  if (!missing.empty())
    throw Incomplete(fmt::format(
        "cannot merge: layers {} of the {} are in no part: run the tasks that advise them (--shard K/N, K = layer "
        "mod N), then merge again; nothing was written",
        fmt::join(missing, ", "), layers));
  MergedHeads m;
  HeadsAdvice& a = m.advice;
  a.options = options;
  a.options.budget = parts[0].at("budget_considered");
  a.layers = layers, a.q_heads = q_heads, a.kv_heads = inputs.at("kv_heads"), a.layered = inputs.at("layered");
  a.grouped_query = inputs.at("grouped_query").is_null() ? "" : inputs.at("grouped_query").get<std::string>();
  J all_rows = J::array(), all_heads = J::array();
  for (std::size_t i = 0; i < head.size(); ++i) {
    require(head[i] != nullptr, "{}: layer {} head {} is missing from its part: rerun that part",
            names[from[i / q_heads]], i / q_heads, i % q_heads);
    a.heads.push_back(summary_head(*head[i], rows[i], a.options));
    all_heads.push_back(*head[i]);
    for (const J* r : rows[i]) all_rows.push_back(*r);
  }
  summarise_heads(a);
  m.report = heads_json(a, parts[0].at("options"), std::move(all_rows), std::move(all_heads));
  return m;
}

}  // namespace kestrel
