// The option tables of kestrel.classify and kestrel.attention_error (see task_options.hpp).
#include "frontend/task_options.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

namespace kestrel {

namespace {

using W = const std::string&;

template <typename O>
Option<O> sampler_option(Sampler O::*field) {
  return option<O>(
      "sampler", "Projections: iid, orthogonal, simplex, structured or halton (discrete families ignore it)",
      OptionKind::Text,
      [field](O& o, W where, W text) {
        try {
          o.*field = parse_sampler(text);
        } catch (const InvalidArgument& e) {
          throw InvalidArgument(fmt::format("{}: {}", where, e.what()));
        }
      },
      [field](const O& o) { return to_string(o.*field); });
}

OptionTable<NwOptions> nw_table() {
  using O = NwOptions;
  OptionTable<O> t;
  t.push_back(option<O>(
      "sigmas", "Kernel widths tuned on the validation part (default: 10 log-uniform in [1e-2, 1e2])", OptionKind::Real,
      [](O& o, W where, W text) {
        o.sigmas.clear();
        for (const auto& item : split_list(where, text)) {
          const double s = parse_real(where, item);
          require(std::isfinite(s) && s > 0, "{}: expected a number > 0, got '{}'", where, item);
          o.sigmas.push_back(s);
        }
      },
      [](const O& o) {
        std::string s;
        for (double x : o.sigmas) s += (s.empty() ? "" : ",") + fmt::format("{}", x);
        return s;
      },
      {.list = true}));
  t.push_back(
      count_option<O>("seeds", "Feature draws per sigma (validation) and at the best sigma (test)", &O::seeds, 1));
  t.push_back(count_option<O>("features", "Real feature columns M (complex estimators draw M / 2)", &O::M, 1));
  t.push_back(sampler_option<O>(&O::sampler));
  t.push_back(seed_option<O>("Seed of the split and the draws", &O::seed));
  return t;
}

}  // namespace

const OptionTable<ClassifyOptions>& classify_option_table() {
  static const OptionTable<ClassifyOptions> t = [] {
    OptionTable<ClassifyOptions> t;
    append_lifted(t, nw_table(), &ClassifyOptions::nw);
    t.push_back(option<ClassifyOptions>(
        "data-dir", "Data directory (default: $KESTREL_DATA_DIR or the repository's datasets/)", OptionKind::Text,
        [](ClassifyOptions& o, W where, W text) {
          std::error_code ec;
          require(std::filesystem::is_directory(text, ec), "{}: '{}' is not a directory", where, text);
          o.data_dir = text;
        },
        [](const ClassifyOptions& o) { return o.data_dir; }));
    return t;
  }();
  return t;
}

const OptionTable<AttentionErrorOptions>& attention_error_option_table() {
  using O = AttentionErrorOptions;
  static const OptionTable<O> t = [] {
    OptionTable<O> t;
    t.push_back(count_option<O>("features", "Real feature columns M", &O::features, 1));
    t.push_back(count_option<O>("reps", "Independent draws", &O::reps, 1));
    t.push_back(seed_option<O>("Seed of the draws: draw r uses stream (seed, Features, r)", &O::seed));
    t.push_back(sampler_option<O>(&O::sampler));
    t.push_back(flag_option<O>("stabilise", "Subtract the per-row max on the query side and one max on the key side",
                               &O::stabilise));
    return t;
  }();
  return t;
}

}  // namespace kestrel
