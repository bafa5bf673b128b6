// The options table of `kestrel advise` (see advise_options.hpp).
#include "frontend/advise_options.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/rounded_sums.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "estimators/registry.hpp"

namespace kestrel {

namespace {

using O = AdviseOptions;
using W = const std::string&;

std::string one_of(W where, W text, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), text) != names.end()) return text;
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) list += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
  throw InvalidArgument(fmt::format("{}: expected {}, got '{}'{}", where, list, text, did_you_mean(text, names)));
}

// The options of the learned candidates (tasks/advise/learned.hpp).
void add_learned_options(std::vector<AdviseOption>& t) {
  t.push_back(option<O>(
      "learned",
      "Learned feature maps to fit per head next to the random families: hedgehog (Hedgehog's exp(+-(Wx + b)) map, "
      "fitted to the head's attention rows by their cross-entropy); needs several sequences of the head (a .npy "
      "[sequences, L, d]): each map is fitted on some and judged on the others (--held-out)",
      OptionKind::Text,
      [](O& o, W where, W text) {
        o.learned.clear();
        for (const auto& item : split_list(where, text)) o.learned.push_back(one_of(where, item, {"hedgehog"}));
        require_distinct(where, o.learned);
      },
      [](const O& o) { return comma_list(o.learned); }, {.list = true}));
  t.push_back(option<O>(
      "learned-features",
      "With --learned: the M a map is fitted at (even, increasing; each fit starts from the last M's map)",
      OptionKind::Integer,
      [](O& o, W where, W text) {
        o.learned_features.clear();
        for (const auto& item : split_list(where, text)) {
          const auto m = parse_uint(where, item, 2, 1u << 16);
          require(m % 2 == 0 && (o.learned_features.empty() || m > o.learned_features.back()),
                  "{}: expected even, increasing numbers of features, got '{}'", where, text);
          o.learned_features.push_back(m);
        }
      },
      [](const O& o) { return comma_list(o.learned_features); }, {.list = true}));
  t.push_back(count_option<O>("fit-seeds",
                              "With --learned: fits per M, each with its own split of the sequences and its own start "
                              "(the held-out error's SE is over them)",
                              &O::fit_seeds, 1, 64));
  t.push_back(count_option<O>("held-out", "With --learned: sequences each fit holds out to be judged on", &O::held_out,
                              1, 1u << 20));
  t.push_back(count_option<O>("fit-iterations",
                              "With --learned: L-BFGS iterations per M at most (a fit also stops when an iteration "
                              "lowers the objective by less than 1e-9 of it)",
                              &O::fit_iterations, 1, 100000));
}

// The options of simulated attention rows: their validation, draws and the work that settles them.
void add_simulation_options(std::vector<AdviseOption>& t) {
  t.push_back(option<O>(
      "validate", "Check each prediction with this many draws at its M (0: no check; else >= 2)", OptionKind::Integer,
      [](O& o, W where, W text) {
        const auto v = parse_uint(where, text);
        require(v == 0 || v >= 2, "{}: expected 0 or a number >= 2, got '{}'", where, text);
        o.validate = v;
      },
      [](const O& o) { return std::to_string(o.validate); }));
  t.push_back(
      count_option<O>("draws",
                      "Nested draws behind each simulated prediction up to M = 128 (fewer above, at least a quarter); "
                      ">= 2",
                      &O::draws, 2, 1u << 20));
  t.push_back(option<O>(
      "time-budget",
      "Seconds of simulation work per input (per head when stacked) for settling the simulated rows, shared by them "
      "in order (each gets at least an equal share); a row whose settling would take more says \"not settled\" and "
      "how long it would take. Work is counted, not timed (the same decisions on any machine), at the rate of the "
      "2-core machine the docs use",
      OptionKind::Real,
      [](O& o, W where, W text) {
        const double v = parse_real(where, text);
        require(v >= 0 && v <= 1e6, "{}: expected seconds in [0, 1e6], got '{}'", where, text);
        o.time_budget = v;
      },
      [](const O& o) { return fmt::format("{}", o.time_budget); }));
  t.push_back(option<O>(
      "max-draws",
      "Most draws at the M around a simulated row's answer before it says \"not settled\" (0: as many as "
      "--time-budget allows; else >= 2)",
      OptionKind::Integer,
      [](O& o, W where, W text) {
        const auto v = parse_uint(where, text);
        require(v == 0 || (v >= 2 && v <= (1u << 20)), "{}: expected 0 or a number in [2, 1048576], got '{}'", where,
                text);
        o.max_draws = v;
      },
      [](const O& o) { return std::to_string(o.max_draws); }));
  t.push_back(flag_option<O>(
      "full-curve",
      "Simulate every error curve up to --budget (default: stop 2x past the M where the 95th percentile + "
      "2 SE reaches the target; draws are then added around the answer until it is settled)",
      &O::full_curve));
}

// The largest M considered: a number, capped with --pays-only where random features stop paying at the input's L.
void add_budget_options(std::vector<AdviseOption>& t) {
  t.push_back(
      count_option<O>("budget", "Largest number of features M considered (at most 1048576)", &O::budget, 1, 1 << 20));
  t.push_back(flag_option<O>(
      "pays-only",
      "Consider only the M at which random-feature attention costs fewer FLOPs than exact attention at the input's L "
      "(--budget capped there: M <= 98 at L = 197, M <= 256 at L = 1024 causal): a row that does not reach the "
      "target there is a head to keep on softmax. For a whole model's heads, where most of the time otherwise goes to "
      "settling M far beyond where random features pay",
      &O::pays_only));
}

std::vector<AdviseOption> make_table() {
  std::vector<AdviseOption> t;
  t.push_back(option<O>(
      "quantity",
      "What the error is of: attention (output rows with --values, else the row normalisers) or kernel "
      "(entries K(q, k))",
      OptionKind::Text,
      [](O& o, W where, W text) {
        o.quantity = one_of(where, text, {"attention", "kernel"}) == "kernel" ? AdviseQuantity::Kernel
                                                                              : AdviseQuantity::Attention;
      },
      [](const O& o) { return to_string(o.quantity); }));
  t.push_back(option<O>(
      "kernel", "softmax, or gaussian (with --quantity kernel)", OptionKind::Text,
      [](O& o, W where, W text) {
        o.kernel = Kernel::parse(one_of(where, text, {"softmax", "gaussian"}));
      },
      [](const O& o) { return o.kernel.name(); }));
  t.push_back(option<O>(
      "scaling", "sqrt-d: logits q.k / sqrt(d), as in transformers (points divided by d^(1/4)); none: logits q.k",
      OptionKind::Text,
      [](O& o, W where, W text) {
        o.scale_sqrt_d = one_of(where, text, {"sqrt-d", "none"}) == "sqrt-d";
      },
      [](const O& o) { return std::string(o.scale_sqrt_d ? "sqrt-d" : "none"); }));
  t.push_back(option<O>(
      "metric",
      "Error of attention rows: rmse (sqrt(E|Y-hat_i - Y_i|^2) / RMS|Y|), mean-abs (E mean|Y-hat - Y| / "
      "mean|Y|), row-relative (/ |Y_i|), centred (/ RMS|Y_i - mean V|) or tv (total variation of the "
      "attention row; no V needed)",
      OptionKind::Text, [](O& o, W where, W text) { o.metric = parse_metric(one_of(where, text, metric_names())); },
      [](const O& o) { return to_string(o.metric); }));
  t.push_back(option<O>(
      "target", "Error to reach in the chosen metric (e.g. 0.1 for 10%)", OptionKind::Real,
      [](O& o, W where, W text) {
        const double v = parse_real(where, text);
        require(v > 0, "{}: expected a number > 0, got '{}'", where, text);
        o.target = v;
      },
      [](const O& o) { return fmt::format("{}", o.target); }));
  add_budget_options(t);
  t.push_back(option<O>(
      "estimators", "Estimators to compare (comma-separated; default: every family in the registry)", OptionKind::Text,
      [](O& o, W where, W text) {
        o.estimators.clear();
        if (text == "all") return;  // the default, as shown
        for (const auto& item : split_list(where, text)) o.estimators.push_back(one_of(where, item, estimator_names()));
        require_distinct(where, o.estimators);
      },
      [](const O& o) { return o.estimators.empty() ? std::string("all") : comma_list(o.estimators); }, {.list = true}));
  t.push_back(option<O>(
      "samplers",
      "Projections: iid, orthogonal, simplex (comma-separated; coupled ones are exact for kernel entries "
      "(simplex costs 1-50 ms per pair and M) and simulated for attention rows)",
      OptionKind::Text,
      [](O& o, W where, W text) {
        o.samplers.clear();
        std::vector<std::string> names;
        for (const auto& item : split_list(where, text)) {
          names.push_back(one_of(where, item, {"iid", "orthogonal", "simplex"}));
          o.samplers.push_back(parse_sampler(item));
        }
        require_distinct(where, names);
      },
      [](const O& o) {
        std::vector<std::string> names;
        for (Sampler x : o.samplers) names.push_back(to_string(x));
        return comma_list(names);
      },
      {.list = true}));
  t.push_back(count_option<O>("rows", "Query rows sampled for the error quantiles (all when fewer)", &O::rows, 2));
  t.push_back(
      count_option<O>("pairs", "About how many (query, key) pairs the kernel-entry quantiles use", &O::pairs, 1));
  add_simulation_options(t);
  t.push_back(option<O>(
      "sums",
      "Number formats to hold the key sums S = sum_j phi(k_j) [v_j, 1]^T in: fp32, bf16, fp16 (comma-separated; "
      "the recommended estimator at its M, every addition rounded to the format; needs values)",
      OptionKind::Text,
      [](O& o, W where, W text) {
        o.sums.clear();
        for (const auto& item : split_list(where, text)) o.sums.push_back(one_of(where, item, float_format_names()));
        require_distinct(where, o.sums);
      },
      [](const O& o) { return comma_list(o.sums); }, {.list = true}));
  t.push_back(
      count_option<O>("chunk",
                      "With --sums: keys per chunk, summed in fp32 before each chunk's total is added in the format, "
                      "as chunked prefill (1: token by token, as decoding)",
                      &O::chunk, 1));
  t.push_back(flag_option<O>(
      "causal",
      "Causal attention: query i attends to keys 0..i (needs as many queries as keys), summed by prefix sums as causal "
      "random-feature attention does; rows are sampled stratified over positions and the error is reported by position",
      &O::causal));
  t.push_back(count_option<O>(
      "from-position",
      "With --causal: also decide M over the sampled rows at positions >= this one (early rows see few keys; 0: not "
      "asked)",
      &O::from_position));
  t.push_back(seed_option<O>("Seed of the row sample, the draws and the validation", &O::seed));
  t.push_back(
      flag_option<O>("no-timing", "Do not time exact and random-feature attention on this machine", &O::timing, true));
  return t;
}

}  // namespace

const std::vector<AdviseOption>& advise_options() {
  static const std::vector<AdviseOption> t = [] {
    std::vector<AdviseOption> table = make_table();
    add_learned_options(table);
    return table;
  }();
  return t;
}

AdviseOptions advise_options_from(const StudyValues& values) {
  AdviseOptions o;
  apply_given(advise_options(), values, o);
  // Options that one quantity only reads are refused with the other, naming what is set (issue 37 item 9): kernel
  // and pairs are for kernel entries; metric, draws, max-draws and full-curve for simulated attention rows (kernel
  // entries are exact).
  const bool kernel = o.quantity == AdviseQuantity::Kernel;
  for (const char* name :
       {"kernel", "pairs", "metric", "draws", "max-draws", "time-budget", "full-curve", "sums", "chunk"}) {
    const bool for_kernel = std::string(name) == "kernel" || std::string(name) == "pairs";
    if (values.count(name) && for_kernel != kernel)
      throw InvalidArgument(fmt::format("{} '{}': only used with quantity {} (the quantity is '{}'{})",
                                        values.at(name).where, values.at(name).text,
                                        for_kernel ? "kernel" : "attention", to_string(o.quantity),
                                        std::string(name) == "kernel" ? ": attention is softmax attention" : ""));
  }
  if (values.count("chunk") && o.sums.empty())
    throw InvalidArgument(
        fmt::format("{} '{}': the chunk is the order of the key sums in number formats: give --sums "
                    "too (e.g. --sums fp32,bf16,fp16)",
                    values.at("chunk").where, values.at("chunk").text));
  for (const char* name : {"learned-features", "fit-seeds", "held-out", "fit-iterations"})
    if (values.count(name) && o.learned.empty())
      throw InvalidArgument(fmt::format("{} '{}': only used with --learned (e.g. --learned hedgehog)",
                                        values.at(name).where, values.at(name).text));
  if (!o.learned.empty() && kernel)
    throw InvalidArgument(fmt::format("{} '{}': learned maps are fitted to attention rows: not with quantity kernel",
                                      values.at("learned").where, values.at("learned").text));
  if (!o.learned.empty() && o.metric != AdviseMetric::Rmse)
    throw InvalidArgument(
        fmt::format("{} '{}': learned maps are judged by the rmse of attention rows: leave out --metric "
                    "or give rmse",
                    values.at("metric").where, values.at("metric").text));
  if (!o.learned.empty() && !o.sums.empty())
    throw InvalidArgument(
        fmt::format("{} '{}': the rounding of number formats is emulated for random rows only: leave "
                    "out --sums with --learned",
                    values.at("sums").where, values.at("sums").text));
  // A total variation is at most 1: a target of 1 or more is reached by any M.
  if (o.metric == AdviseMetric::Tv && o.target >= 1)
    throw InvalidArgument(fmt::format(
        "{} '{}': metric tv (the total variation of attention rows) is at most 1, so any M reaches it; give a target "
        "below 1 (e.g. 0.1)",
        values.count("target") ? values.at("target").where : "target", fmt::format("{}", o.target)));
  return o;
}

nlohmann::json record_advise(const AdviseOptions& o) { return record_options(advise_options(), o); }

AdviseOptions summary_options_from_record(const nlohmann::json& record, const std::string& where) {
  AdviseOptions o;
  for (const char* name : {"target", "metric", "quantity", "causal", "pays-only", "scaling", "seed"}) {
    require(record.contains(name), "{}: the recorded options have no '{}': not written by this kestrel?", where, name);
    const nlohmann::json& v = record.at(name);
    const std::string text = v.is_string()    ? v.get<std::string>()
                             : v.is_boolean() ? (v.get<bool>() ? "true" : "false")
                                              : v.dump();
    find_option(advise_options(), name)->set(o, where, text);
  }
  return o;
}

}  // namespace kestrel
