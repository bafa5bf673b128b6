// The option table of `kestrel reproduce` / kestrel.reproduce (see reproduce_options.hpp).
#include "reproduce_options.hpp"

#include <fmt/format.h>

#include "frontend/regime_options.hpp"

namespace kestrel::experiments {

namespace {

using W = const std::string&;

std::string protocols_help() {
  std::string protocols;
  for (const auto& e : all_experiments()) {
    if (e.protocols.empty()) continue;
    protocols += fmt::format("{}{}: ", protocols.empty() ? "" : "; ", e.name);
    for (std::size_t i = 0; i < e.protocols.size(); ++i)
      protocols += (i ? ", " : "") + e.protocols[i].name + (i ? "" : " (default)");
  }
  return "Reading of the paper's protocol, for one reproduction that offers several (" + protocols + ")";
}

std::string takes_rows() {
  std::string s;
  for (const auto& e : all_experiments())
    if (e.query_rows) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

OptionTable<Options> make_table() {
  OptionTable<Options> t;
  t.push_back(
      flag_option<Options>("force", "Replace existing outputs of these reproductions in --out", &Options::replace));
  t.push_back(flag_option<Options>("quick", "Reduced sizes (same code path), for tests and CI", &Options::quick));
  t.push_back(seed_option<Options>("Seed of all random draws", &Options::seed));
  t.push_back(option<Options>(
      "protocol", protocols_help(), OptionKind::Text,
      [](Options& o, W, W text) { o.protocol = text; },  // checked against the reproduction
      [](const Options& o) { return o.protocol; }));
  t.push_back(option<Options>(
      "rows",
      "Query rows sampled with --seed for the exact per-row predictions over all queries, or all (" + takes_rows() +
          ")",
      OptionKind::Text,
      [](Options& o, W where, W text) { o.rows = text == "all" ? 0 : parse_uint(where, text, 1, INT64_MAX); },
      [](const Options& o) { return o.rows ? std::to_string(o.rows) : std::string("all"); }, {.integer_text = true}));
  append_lifted(t, image_option_table(), &Options::regime_options);
  return t;
}

}  // namespace

const OptionTable<Options>& reproduce_option_table() {
  static const OptionTable<Options> t = make_table();
  return t;
}

std::string reproduction_names() {
  std::string names;
  for (const auto& e : all_experiments()) names += (names.empty() ? "" : ", ") + e.name;
  return names + ", or all";
}

std::vector<const Experiment*> reproduction_request(const std::string& name, const GivenValues& values, Options& o) {
  apply_given(reproduce_option_table(), values, o);
  std::vector<const Experiment*> todo;
  if (name == "all")
    for (const auto& e : all_experiments()) todo.push_back(&e);
  else
    todo.push_back(&find_experiment(name));
  if (!o.protocol.empty()) {
    require(name != "all", "--protocol '{}' needs one reproduction, not all", o.protocol);
    resolve_protocol(*todo.front(), o.protocol);  // an unknown protocol stops here
  }
  if (o.rows) {
    const std::string rows = values.at("rows").text;
    for (const auto* e : todo) {
      require(e->query_rows || name == "all", "--rows {}: {} takes no row sample (only {})", rows, e->name,
              takes_rows());
      if (e->query_rows)
        require(o.rows <= e->query_rows(o), "--rows {} exceeds the {} query rows of {} (give at most {} or all)", rows,
                e->query_rows(o), e->name, e->query_rows(o));
    }
  }
  return todo;
}

}  // namespace kestrel::experiments
