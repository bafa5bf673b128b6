// The study options table, strict TOML reading and the builders of VarianceStudyOptions / SweepOptions
// (see study_options.hpp).
#include "frontend/study_options.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/parse.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"
#include "frontend/regime_options.hpp"

namespace kestrel {

namespace {

// Re-throws a library error with the source of the value in front (and the nearest name when given).
template <typename F>
auto named(const std::string& where, F&& f, const std::string& item = "", const std::vector<std::string>& names = {}) {
  try {
    return f();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}{}", where, e.what(), names.empty() ? "" : did_you_mean(item, names)));
  }
}

std::vector<std::string> family_names() { return estimator_names(); }

std::vector<double> parse_positive_reals(const std::string& where, const std::string& text) {
  std::vector<double> out;
  const std::vector<std::string> items = split_list(where, text);
  const auto digits = [](const std::string& t) { return t.find_first_not_of("0123456789") == std::string::npos; };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    const double v = parse_real(where, item);
    // "0,5": a decimal comma read as the list 0, 5.
    require(v > 0 || i + 1 == items.size() || !digits(item) || !digits(items[i + 1]),
            "{}: expected numbers > 0, got '{}' in the list '{}': ',' separates list items; for a decimal number "
            "write '{}.{}'",
            where, item, text, item, items[i + 1]);
    require(v > 0, "{}: expected a number > 0, got '{}'", where, item);
    require(std::find(out.begin(), out.end(), v) == out.end(), "{}: '{}' is listed twice", where, item);
    out.push_back(v);
  }
  return out;
}

std::vector<StudyOption> make_table() {
  using O = VarianceStudyOptions;
  using W = const std::string&;
  std::vector<StudyOption> t;
  t.push_back(option<O>(
      "regime", regime_help(), OptionKind::Text,
      [](O& x, W where, W text) {
        named(
            where, [&] { validate_regime(text); }, text, regime_names());
        x.regime = text;
      },
      [](const O& x) { return x.regime; }));
  t.push_back(option<O>(
      "sigma", "Scale(s) sigma > 0, comma-separated", OptionKind::Real,
      [](O& x, W where, W text) { x.sigmas = parse_positive_reals(where, text); },
      [](const O& x) { return comma_list(x.sigmas); }, {.list = true}));
  t.push_back(
      count_option<O>("dim", "Dimension d (file regime: from the file)", &O::dim, 1, UINT64_MAX, {.sweep_axis = true}));
  t.push_back(count_option<O>("points", "Points per set L (file regime: all the file allows)", &O::points, 1,
                              UINT64_MAX, {.sweep_axis = true}));
  t.push_back(count_option<O>("pairs", "Number of (X, Y) set pairs", &O::pairs, 1));
  t.push_back(seed_option<O>("Seed of all random draws", &O::seed));
  t.push_back(option<O>(
      "estimators", "Estimators, comma-separated (see `kestrel estimators`)", OptionKind::Text,
      [](O& x, W where, W text) {
        const auto items = split_list(where, text);
        require_distinct(where, items);
        for (const auto& e : items)
          named(
              where, [&] { find_estimator_family(e); }, e, family_names());
        x.estimators = items;
      },
      [](const O& x) { return comma_list(x.estimators); }, {.list = true}));
  t.push_back(option<O>(
      "kernel", "softmax, gaussian or scaled:<alpha>", OptionKind::Text,
      [](O& x, W where, W text) { x.kernel = named(where, [&] { return Kernel::parse(text); }); },
      [](const O& x) { return x.kernel.name(); }));
  t.push_back(count_option<O>("features", "M: report the variance of the M-feature estimate", &O::features, 1,
                              UINT64_MAX, {.sweep_axis = true}));
  t.push_back(option<O>(
      "mc", "Also run Monte Carlo with this many repetitions (0 = off, else >= 4)", OptionKind::Integer,
      [](O& x, W where, W text) {
        x.mc_reps = parse_uint(where, text);
        require(x.mc_reps == 0 || x.mc_reps >= 4, "{}: Monte Carlo needs 0 (off) or at least 4 repetitions, got '{}'",
                where, text);
      },
      [](const O& x) { return std::to_string(x.mc_reps); }));
  t.push_back(option<O>(
      "mc-points", "Monte Carlo on the first N <= L points of each set (default: min(64, L))", OptionKind::Integer,
      [](O& x, W where, W text) { x.mc_points = parse_uint(where, text, 1); },
      [](const O& x) { return x.mc_points ? std::to_string(x.mc_points) : std::string(); }));
  t.push_back(option<O>(
      "sampler", "Projections for Monte Carlo: iid, orthogonal, simplex, structured (SORF, slightly biased) or halton",
      OptionKind::Text, [](O& x, W where, W text) { x.sampler = named(where, [&] { return parse_sampler(text); }); },
      [](const O& x) { return to_string(x.sampler); }));
  t.push_back(flag_option<O>(
      "halve-real", "Give real-valued estimators 2M features (CRT 9.10.1: a complex feature holds two real numbers)",
      &O::halve_real));
  t.push_back(option<O>(
      "quantity",
      "What to study: pair (each kernel entry), kc (each entry of K-hat V) or attention (each row of "
      "K-hat V / K-hat 1: the delta method's MSE)",
      OptionKind::Text,
      [](O& x, W where, W text) {
        x.quantity = named(where, [&] { return parse_quantity(text); }, text, {"pair", "kc", "attention"});
      },
      [](const O& x) { return to_string(x.quantity); }));
  t.push_back(option<O>(
      "values", "kc, attention: the values V, one row per key: normal (N(0,1)), uniform (U[0,1)) or ones",
      OptionKind::Text,
      [](O& x, W where, W text) {
        require(std::find(kValueKinds.begin(), kValueKinds.end(), text) != kValueKinds.end(),
                "{}: expected normal, uniform or ones, got '{}'{}", where, text, did_you_mean(text, kValueKinds));
        x.values = text;
      },
      [](const O& x) { return x.values; }));
  t.push_back(count_option<O>("value-dim", "kc, attention: columns of V", &O::value_dim, 1));
  append_lifted(t, regime_option_table(), &VarianceStudyOptions::regime_options);
  return t;
}

bool given(const StudyValues& v, const std::string& name) { return v.count(name) > 0; }
std::string where_of(const StudyValues& v, const std::string& name) {
  return given(v, name) ? v.at(name).where : "--" + name;
}

// Options that only some regimes or quantities read. Given where nothing reads them they would be ignored without a
// word, so each is refused alike, naming the option, what it needs and what is set (issue 37 item 9).
void check_context(const VarianceStudyOptions& o, const StudyValues& v) {
  const Regime& drawn = find_regime(o.regime);
  const bool image = drawn.images;
  std::string image_regimes;  // "mnist, fashion-mnist, cifar10, mnist/cifar10"
  for (const Regime& r : regimes())
    if (r.images) image_regimes += (image_regimes.empty() ? "" : ", ") + r.name;
  const std::string regime = fmt::format("the regime is '{}'", o.regime);
  // The simulator runs with --mc, and for the rows of families without a closed form for the quantity (variance_study).
  bool simulated = o.mc_reps > 0;
  for (const auto& name : o.estimators) {
    const Family& f = find_family(name);
    simulated = simulated || (o.quantity == Quantity::Pair ? !f.exact_variance : !f.has_three_point_form);
  }
  struct Rule {
    std::vector<const char*> options;
    bool used;
    std::string needs, actual;
  };
  const std::vector<Rule> rules = {
      {{"data-dir", "preprocess", "resize"}, image, "an image regime (" + image_regimes + ")", regime},
      {{"pixel-scale"},
       image && (o.regime_options.preprocess == Preprocess::Raw || o.regime_options.preprocess == Preprocess::Center),
       "an image regime and --preprocess raw or center",
       image ? fmt::format("the preprocessing is '{}'", to_string(o.regime_options.preprocess)) : regime},
      {{"values", "value-dim"}, o.quantity != Quantity::Pair, "--quantity kc or attention", "the quantity is 'pair'"},
      {{"sampler", "mc-points"},
       simulated,
       "Monte Carlo: --mc R, or an estimator without a closed form",
       "--mc is 0 and every estimator's column is exact, for iid projections"},
  };
  // The options each regime reads (its entry in the registry): only with that regime.
  for (const Regime& r : regimes())
    for (const std::string& f : r.options)
      require(r.name == o.regime || !given(v, f), "{}: only used with --regime {} ({})", where_of(v, f), r.name,
              regime);
  for (const auto& r : rules)
    for (const char* f : r.options)
      require(r.used || !given(v, f), "{}: only used with {} ({})", where_of(v, f), r.needs, r.actual);
}

// Sets every given option except the sweep axes (those are handled by the sweep builder).
VarianceStudyOptions apply_values(const StudyValues& v, StudyCommand c) {
  VarianceStudyOptions o;
  o.mc_points = 0;  // min(64, L) unless given
  for (const auto& [name, val] : v) {
    const StudyOption& opt = find_study_option(name);
    if (c == StudyCommand::Sweep && opt.sweep_axis) continue;
    if (!takes_list(opt, c) && opt.kind != OptionKind::Text)
      require(val.text.find(',') == std::string::npos, "{}: takes one value in `kestrel {}`, got the list '{}'{}",
              val.where, to_string(c), val.text,
              opt.sweep_axis ? " (lists of d, L and M are for `kestrel sweep`)" : "");
    opt.set(o, val.where, val.text);
  }
  check_context(o, v);
  if (o.regime == "file")
    require(given(v, "x-file"),
            "--regime file needs --x-file (points, one per row: CSV/text, .npy or FILE.h5:/dataset)");
  return o;
}

// Checks of one (d, L) combination that the library's validate() cannot phrase in the user's terms.
void check_combination(const VarianceStudyOptions& o, const StudyValues& v, const FileShape* shape) {
  if (shape) {
    require(o.dim == shape->dim, "{}: {} does not match the points of {} (d = {})", where_of(v, "dim"), o.dim,
            o.regime_options.x_file, shape->dim);
    require(o.points <= shape->max_points,
            "{}: {} is more than the file regime can draw: {} room for {} disjoint points per set",
            where_of(v, "points"), o.points,
            o.regime_options.y_file.empty() ? o.regime_options.x_file + " has" : "the files have", shape->max_points);
  }
  if (o.regime == "aniso") named(where_of(v, "spectrum"), [&] { parse_spectrum(o.regime_options.spectrum, o.dim); });
  if (o.regime == "clustered")
    require(o.regime_options.clusters <= o.points,
            "{}: {} clusters is more than {} {}: some clusters would have no point (each set has L points, given "
            "to the clusters in turn)",
            where_of(v, "clusters"), o.regime_options.clusters, where_of(v, "points"), o.points);
  if (o.mc_reps > 0 && o.mc_points > 0)
    require(o.mc_points <= o.points,
            "{}: {} is more than --points {} (Monte Carlo runs on the first N points of each set)",
            where_of(v, "mc-points"), o.mc_points, o.points);
  // Two sets of d x L doubles (and a scaled copy), tiles of 256 x L pairs in the streamed summaries (a few
  // per thread), d x d fits, and the Monte Carlo moments.
  const double d = static_cast<double>(o.dim), L = static_cast<double>(o.points);
  const double mc =
      o.mc_reps ? std::pow(static_cast<double>(o.mc_points ? o.mc_points : std::min<double>(64, L)), 2) : 0;
  const double bytes = 8.0 * (4 * d * L + 16 * 256 * L + 8 * d * d + 8 * mc);
  require_memory(bytes, fmt::format("{} {} with {} {}", where_of(v, "points"), o.points, where_of(v, "dim"), o.dim));
}

std::unique_ptr<FileShape> file_shape(const VarianceStudyOptions& o) {
  if (o.regime != "file") return nullptr;
  return std::make_unique<FileShape>(file_regime_shape(o.regime_options));
}

std::string toml_scalar(const toml::node& n, const StudyOption& opt, const std::string& where) {
  auto wrong = [&](const char* got) {
    const char* want = opt.kind == OptionKind::Integer ? "an integer"
                       : opt.kind == OptionKind::Real  ? "a number"
                       : opt.kind == OptionKind::Flag  ? "true or false"
                                                       : "a string";
    return InvalidArgument(fmt::format("{}: expected {}, got {}", where, want, got));
  };
  if (auto s = n.as_string()) {
    if (opt.kind != OptionKind::Text) throw wrong(fmt::format("the string \"{}\"", s->get()).c_str());
    return s->get();
  }
  if (auto i = n.as_integer()) {
    if (opt.kind != OptionKind::Integer && opt.kind != OptionKind::Real)
      throw wrong(fmt::format("the number {}", i->get()).c_str());
    return std::to_string(i->get());
  }
  if (auto f = n.as_floating_point()) {
    if (opt.kind != OptionKind::Real) throw wrong(fmt::format("the number {}", f->get()).c_str());
    return fmt::format("{}", f->get());
  }
  if (auto b = n.as_boolean()) {
    if (opt.kind != OptionKind::Flag) throw wrong(b->get() ? "true" : "false");
    return b->get() ? "true" : "false";
  }
  throw wrong(n.is_array() ? "a nested list" : n.is_table() ? "a table" : "a date or time");
}

std::string at(const std::string& path, const toml::source_region& s) {
  return fmt::format("{}:{}:{}", path, s.begin.line, s.begin.column);
}

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A value of the other command's section, checked as that command would read it, one value at a time (building
// that command's whole options would need the command line that goes with them).
void check_other_section(const StudyOption& opt, StudyCommand c, const std::string& where, const std::string& text) {
  VarianceStudyOptions probe;
  if (opt.sweep_axis && !opt.list && c == StudyCommand::Sweep)
    for (const auto& item : split_list(where, text)) opt.set(probe, where, item);
  else
    opt.set(probe, where, text);
}

}  // namespace

const std::vector<StudyOption>& study_options() {
  static const std::vector<StudyOption> table = make_table();
  return table;
}

std::vector<std::string> study_option_names() {
  std::vector<std::string> n;
  for (const auto& o : study_options()) n.push_back(o.name);
  return n;
}

const StudyOption& find_study_option(const std::string& name, const std::string& prefix) {
  for (const auto& o : study_options())
    if (o.name == name) return o;
  throw InvalidArgument(
      fmt::format("unknown option '{}{}'{}", prefix, name, did_you_mean(name, study_option_names(), prefix)));
}

bool takes_list(const StudyOption& o, StudyCommand c) { return o.list || (o.sweep_axis && c == StudyCommand::Sweep); }

StudyValues read_study_toml(const std::string& path, StudyCommand command) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputFileError(fmt::format("{}: cannot open config file ({})", path,
                                     std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw InvalidArgument(fmt::format("{}: TOML syntax error: {}", at(path, e.source()), e.description()));
  }
  const std::vector<std::string> sections = {"variance", "sweep"};
  StudyValues out;
  std::vector<std::string> found;
  for (auto&& [key, node] : doc) {
    const std::string k(key.str());
    if (!node.is_table())
      throw InvalidArgument(fmt::format("{}: key '{}' is outside a section: put the options under [{}]",
                                        at(path, key.source()), k, to_string(command)));
    if (std::find(sections.begin(), sections.end(), k) == sections.end())
      throw InvalidArgument(fmt::format("{}: unknown section [{}]{} (sections: [variance], [sweep])",
                                        at(path, node.source()), k, did_you_mean(k, sections)));
    const StudyCommand c = k == "variance" ? StudyCommand::Variance : StudyCommand::Sweep;
    found.push_back("[" + k + "]");
    for (auto&& [okey, val] : *node.as_table()) {
      const std::string name(okey.str());
      const std::string where = fmt::format("{}: {}", at(path, okey.source()), name);
      if (name == "out" || name == "json" || name == "config" || name == "threads" || name == "quiet" ||
          name == "shard")
        throw InvalidArgument(fmt::format("{}: '{}' is a command-line option, not a config key", where, name));
      const StudyOption& opt =
          named(at(path, okey.source()), [&]() -> const StudyOption& { return find_study_option(name); });
      std::string text;
      if (auto arr = val.as_array()) {
        if (!takes_list(opt, c))
          throw InvalidArgument(fmt::format("{}: takes one value in [{}], got a list{}", where, k,
                                            opt.sweep_axis ? " (lists of d, L and M are for [sweep])" : ""));
        if (arr->empty()) throw InvalidArgument(fmt::format("{}: the list is empty", where));
        for (auto&& item : *arr) {
          const std::string s = toml_scalar(item, opt, where);
          require(s.find(',') == std::string::npos, "{}: list items must not contain ',', got '{}'", where, s);
          text += (text.empty() ? "" : ",") + s;
        }
      } else {
        text = toml_scalar(val, opt, where);
      }
      if (c == command)
        out[name] = {text, where};
      else
        check_other_section(opt, c, where, text);
    }
  }
  if (std::find(found.begin(), found.end(), "[" + to_string(command) + "]") == found.end())
    throw InvalidArgument(fmt::format("{}: no [{}] section, so nothing in it is for `kestrel {}` (sections found: {})",
                                      path, to_string(command), to_string(command),
                                      found.empty() ? "none" : join_names(found)));
  return out;  // the other command's section was checked too, so a typo or a bad value there does not wait
}

VarianceStudyOptions variance_options(const StudyValues& v) {
  VarianceStudyOptions o = apply_values(v, StudyCommand::Variance);
  const auto shape = file_shape(o);
  if (shape) {
    if (!given(v, "dim")) o.dim = shape->dim;
    if (!given(v, "points")) o.points = shape->max_points;
  }
  check_combination(o, v, shape.get());
  validate(o);
  return o;
}

SweepOptions sweep_options(const StudyValues& v) {
  SweepOptions s;
  s.base = apply_values(v, StudyCommand::Sweep);
  VarianceStudyOptions& b = s.base;
  const auto shape = file_shape(b);
  auto axis = [&](const char* name, arma::uword VarianceStudyOptions::*field, arma::uword fallback) {
    if (!given(v, name)) return std::vector<arma::uword>{fallback};
    const auto& val = v.at(name);
    std::vector<arma::uword> out;
    VarianceStudyOptions probe;
    for (const auto& item : split_list(val.where, val.text)) {
      find_study_option(name).set(probe, val.where, item);
      require(std::find(out.begin(), out.end(), probe.*field) == out.end(), "{}: '{}' is listed twice", val.where,
              item);
      out.push_back(probe.*field);
    }
    return out;
  };
  s.sigmas = b.sigmas;
  s.dims = axis("dim", &VarianceStudyOptions::dim, shape ? shape->dim : b.dim);
  s.points = axis("points", &VarianceStudyOptions::points, shape ? shape->max_points : b.points);
  s.features = axis("features", &VarianceStudyOptions::features, b.features);
  for (auto d : s.dims)
    for (auto L : s.points) {
      VarianceStudyOptions probe = b;
      probe.dim = d, probe.points = L;
      check_combination(probe, v, shape.get());
    }
  s.recorded = record_sweep(s);
  return s;  // validate(SweepOptions) needs out: run_sweep calls it
}

nlohmann::json record_study(const VarianceStudyOptions& o) { return record_options(study_options(), o); }

nlohmann::json record_sweep(const SweepOptions& s) {
  nlohmann::json j = record_study(s.base);
  j["sigma"] = s.sigmas, j["dim"] = s.dims, j["points"] = s.points, j["features"] = s.features;  // the grid's axes
  return j;
}

// More shards than any job array has (Slurm's MaxArraySize is at most 4000001); a larger N is a mistyped number.
constexpr std::uint64_t kMaxShards = std::uint64_t{1} << 32;

// K/N: two integers around one slash; any other form is named with the whole text and the form (not one half's).
SweepShard parse_shard(const std::string& where, const std::string& text) {
  const auto slash = text.find('/');
  const std::string form =
      fmt::format("{}: expected K/N (shard K of N: two integers, 0 <= K < N), got '{}'", where, text);
  require(slash != std::string::npos && text.find('/', slash + 1) == std::string::npos, "{}", form);
  SweepShard s;
  try {
    s.index = parse_uint(where, text.substr(0, slash));
    s.count = parse_uint(where, text.substr(slash + 1), 1, kMaxShards);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(fmt::format("{} (N at most {})", form, kMaxShards));
  }
  require(s.index < s.count, "{}: expected K/N with 0 <= K < N, got '{}' (shards are numbered from 0)", where, text);
  return s;
}

// The shard of a Slurm job array's task, or none outside an array.
SweepShard slurm_shard(const std::function<const char*(const char*)>& env) {
  const char* id = env("SLURM_ARRAY_TASK_ID");
  if (!id) return {};
  // A step and a count are at least 1 (Slurm never sets 0): a 0 is named with its range.
  auto number = [&](const char* name, const char* fallback, std::uint64_t least = 0, std::uint64_t most = UINT64_MAX) {
    const char* v = env(name);
    require(v || fallback, "{} is set but {} is not: cannot derive this array task's shard; pass --shard K/N",
            "SLURM_ARRAY_TASK_ID", name);
    return parse_uint(name, v ? v : fallback, least, most);
  };
  const std::uint64_t task = number("SLURM_ARRAY_TASK_ID", nullptr), lo = number("SLURM_ARRAY_TASK_MIN", nullptr),
                      hi = number("SLURM_ARRAY_TASK_MAX", nullptr), step = number("SLURM_ARRAY_TASK_STEP", "1", 1),
                      count = number("SLURM_ARRAY_TASK_COUNT", nullptr, 1, kMaxShards);
  // Without products, which wrap around for counts near 2^64 / step.
  require(step > 0 && count > 0 && task >= lo && task <= hi && (task - lo) % step == 0 && (hi - lo) % step == 0 &&
              (hi - lo) / step == count - 1,
          "the Slurm job array's indices are not evenly spaced (SLURM_ARRAY_TASK_ID={}, _MIN={}, _MAX={}, _STEP={}, "
          "_COUNT={}; from --array=1,3, say), so kestrel cannot number this task's shard: submit --array=A-B[:S], "
          "or pass --shard K/N",
          task, lo, hi, step, count);
  return {static_cast<std::size_t>((task - lo) / step), static_cast<std::size_t>(count)};
}

namespace {

OptionTable<SweepOptions> make_run_table() {
  return {option<SweepOptions>(
      "shard",
      "Compute only grid points i with i mod N = K (K/N, 0 <= K < N) into OUT.parts/ for `kestrel sweep merge OUT`; "
      "in a Slurm job array the default is the array task's shard (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of "
      "SLURM_ARRAY_TASK_COUNT), else the whole grid",
      OptionKind::Text,
      [](SweepOptions& s, const std::string& where, const std::string& text) { s.shard = parse_shard(where, text); },
      [](const SweepOptions&) { return std::string(); })};  // the default depends on the environment
}

}  // namespace

const OptionTable<SweepOptions>& sweep_run_options() {
  static const OptionTable<SweepOptions> table = make_run_table();
  return table;
}

void apply_sweep_run(const GivenValues& v, SweepOptions& s, const std::function<const char*(const char*)>& env) {
  apply_given(sweep_run_options(), v, s);
  if (!given(v, "shard")) s.shard = slurm_shard(env);
}

}  // namespace kestrel
