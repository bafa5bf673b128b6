// The options of the Python task functions kestrel.classify and kestrel.attention_error, written once as option
// tables (frontend/option_table.hpp): their keywords, defaults and checks are generated from here.
#pragma once
#include <string>

#include "core/rng.hpp"
#include "frontend/option_table.hpp"
#include "sampling/omega.hpp"
#include "tasks/classification.hpp"

namespace kestrel {

struct ClassifyOptions {
  NwOptions nw = [] {
    NwOptions o;
    o.seeds = 10;  // fewer draws than the paper protocol (50): kestrel.classify is interactive
    return o;
  }();
  std::string data_dir;  // empty: default_data_dir()
};
const OptionTable<ClassifyOptions>& classify_option_table();

struct AttentionErrorOptions {
  arma::uword features = 64;          // real feature columns
  std::size_t reps = 10;              // independent draws
  std::uint64_t seed = kDefaultSeed;  // draw r uses stream (seed, Features, r)
  Sampler sampler = Sampler::Iid;
  bool stabilise = true;  // subtract the per-row max on the query side, one max on the key side
};
const OptionTable<AttentionErrorOptions>& attention_error_option_table();

}  // namespace kestrel
