// The option-table template behind every entry point (issue #36 item 2): an option is written once, as
// {name, help, kind, list, set (parse + check + store), show (the default as text)} over the options struct it fills,
// and the command line (apps/kestrel/option_cli.hpp), the TOML sections (study_options.hpp) and the Python keywords
// (python/bind_options.hpp) are generated from the same table. The front-ends only collect text with where it came
// from; every value then goes through the option's own parser, so names, defaults and validation cannot drift.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/rng.hpp"

namespace kestrel {

enum class OptionKind { Text, Integer, Real, Flag };
template <>
struct EnumNames<OptionKind> {
  static constexpr std::string_view what = "option kind";
  static constexpr std::array<EnumName<OptionKind>, 4> names{{{OptionKind::Text, "text"},
                                                              {OptionKind::Integer, "integer"},
                                                              {OptionKind::Real, "real"},
                                                              {OptionKind::Flag, "flag"}}};
};

template <typename Options>
struct Option {
  std::string name;  // --name on the command line, `name` in TOML, name with '_' for '-' in Python
  std::string help;
  OptionKind kind = OptionKind::Text;
  bool list = false;        // comma-separated list (a TOML array, a Python list)
  bool sweep_axis = false;  // one value in `variance`, a list (a grid axis) in `sweep`
  // Parses one value (one item of a list), checks it and stores it; `where` names the source in errors.
  std::function<void(Options&, const std::string& where, const std::string& text)> set;
  // The default of Options{} as text ("" when the default depends on other options: Python's None).
  std::function<std::string(const Options&)> show;
  bool integer_text = false;  // a text option that also takes integers (rows: all or N; pixel-scale: 1 or 255)
};

template <typename Options>
using OptionTable = std::vector<Option<Options>>;

// Every table entry is written in one style: a call of option() with the option's own parser and default, or of one
// of the helpers below for the common kinds (each a call of option()).
template <typename Options>
using OptionSet = std::function<void(Options&, const std::string& where, const std::string& text)>;
template <typename Options>
using OptionShow = std::function<std::string(const Options&)>;

struct OptionTraits {
  bool list = false;          // Option::list
  bool sweep_axis = false;    // Option::sweep_axis
  bool integer_text = false;  // Option::integer_text
};

template <typename Options>
Option<Options> option(std::string name, std::string help, OptionKind kind, OptionSet<Options> set,
                       OptionShow<Options> show, OptionTraits traits = {}) {
  return {std::move(name), std::move(help),    kind, traits.list, traits.sweep_axis, std::move(set),
          std::move(show), traits.integer_text};
}

// A list option's values as its show() text: comma-separated, each as fmt writes it (a real: the shortest text that
// reads back to the same double). record_options splits it again.
template <typename T>
std::string comma_list(const std::vector<T>& items) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : ",") + fmt::format("{}", x);
  return s;
}

// A whole number lo <= n <= hi stored in `field`.
template <typename Options, typename T>
Option<Options> count_option(std::string name, std::string help, T Options::*field, std::uint64_t lo = 0,
                             std::uint64_t hi = UINT64_MAX, OptionTraits traits = {}) {
  return option<Options>(
      std::move(name), std::move(help), OptionKind::Integer,
      [field, lo, hi](Options& o, const std::string& where, const std::string& text) {
        o.*field = static_cast<T>(parse_uint(where, text, lo, hi));
      },
      [field](const Options& o) { return std::to_string(o.*field); }, traits);
}

// A flag stored in `field`, or its negation (--no-timing sets timing = false).
template <typename Options>
Option<Options> flag_option(std::string name, std::string help, bool Options::*field, bool negated = false) {
  return option<Options>(
      std::move(name), std::move(help), OptionKind::Flag,
      [field, negated](Options& o, const std::string& where, const std::string& text) {
        o.*field = parse_bool(where, text) != negated;
      },
      [field, negated](const Options& o) { return std::string(o.*field != negated ? "true" : "false"); });
}

// The one seed option (--seed) of every entry point: 0 <= seed <= kMaxSeed, default kDefaultSeed (core/rng.hpp).
template <typename Options>
Option<Options> seed_option(std::string help, std::uint64_t Options::*field) {
  return count_option<Options>("seed", std::move(help), field, 0, kMaxSeed);
}

// An option of a part (e.g. the regime options) as an option of the whole that holds the part in `member`: the
// regime's image-pipeline options are written once and offered by variance, sweep, reproduce and draw_regime.
template <typename Whole, typename Part>
Option<Whole> lift(const Option<Part>& o, Part Whole::*member) {
  return {o.name,
          o.help,
          o.kind,
          o.list,
          o.sweep_axis,
          [set = o.set, member](Whole& w, const std::string& where, const std::string& text) {
            set(w.*member, where, text);
          },
          [show = o.show, member](const Whole& w) { return show(w.*member); },
          o.integer_text};
}

template <typename Whole, typename Part>
void append_lifted(OptionTable<Whole>& to, const OptionTable<Part>& from, Part Whole::*member) {
  for (const auto& o : from) to.push_back(lift(o, member));
}

template <typename Options>
std::vector<std::string> option_names(const OptionTable<Options>& t) {
  std::vector<std::string> n;
  for (const auto& o : t) n.push_back(o.name);
  return n;
}

// The option called `name`, or nullptr.
template <typename Options>
const Option<Options>* find_option(const OptionTable<Options>& t, const std::string& name) {
  for (const auto& o : t)
    if (o.name == name) return &o;
  return nullptr;
}

// Values given by the user: option name -> text (a list comma-joined) and where it came from
// ("--seed", "sweep.toml:3:1: seed", "seed=").
struct GivenValue {
  std::string text;
  std::string where;
};
using GivenValues = std::map<std::string, GivenValue>;

// Sets every given value through its option (an unknown name is an error naming the nearest valid one).
template <typename Options>
void apply_given(const OptionTable<Options>& t, const GivenValues& values, Options& o) {
  for (const auto& [name, v] : values) {
    const Option<Options>* opt = find_option(t, name);
    if (!opt)
      throw InvalidArgument(
          fmt::format("{}: unknown option '{}'{}", v.where, name, did_you_mean(name, option_names(t))));
    opt->set(o, v.where, v.text);
  }
}

// What a front-end needs to offer an option without knowing the options struct: the parity test and the generated
// Python signatures read this (`kestrel options --json`, kestrel._options()).
struct OptionInfo {
  std::string name, help;
  OptionKind kind = OptionKind::Text;
  bool list = false;
  std::string default_text;  // "" when the default depends on other options
};

template <typename Options>
std::vector<OptionInfo> describe(const OptionTable<Options>& t, const std::function<bool(const Option<Options>&)>& list,
                                 const Options& defaults = Options{}) {
  std::vector<OptionInfo> out;
  for (const auto& o : t) out.push_back({o.name, o.help, o.kind, list ? list(o) : o.list, o.show(defaults)});
  return out;
}

inline std::string to_string(OptionKind k) { return name_of(k); }

// One value as the record holds it: a number for an integer or a real, true/false for a flag, else the text as given
// (also for a text option that takes integers); null for an empty number (a default that depends on other options).
inline nlohmann::json recorded_value(OptionKind kind, const std::string& text) {
  if (kind == OptionKind::Flag) return text == "true";
  if (kind == OptionKind::Text) return text;
  if (text.empty()) return nullptr;
  if (kind == OptionKind::Integer) return std::stoull(text);
  return std::stod(text);  // show() writes the shortest text that reads back to the same double
}

// The options as provenance and a sweep's resume check record them (issue 45 item 2): {option name: its value as the
// command line spells it}, from each option's own show(), so a new option is recorded without another line. A list is
// an array of its items.
template <typename Options>
nlohmann::json record_options(const OptionTable<Options>& t, const Options& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& opt : t) {
    const std::string text = opt.show(o);
    if (!opt.list) {
      j[opt.name] = recorded_value(opt.integer_text ? OptionKind::Text : opt.kind, text);
      continue;
    }
    nlohmann::json items = nlohmann::json::array();
    for (const auto& item : text.empty() ? std::vector<std::string>{} : split_list(opt.name, text))
      items.push_back(recorded_value(opt.kind, item));
    j[opt.name] = items;
  }
  return j;
}

}  // namespace kestrel
