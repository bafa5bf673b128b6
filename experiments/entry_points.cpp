// The table of kestrel's entry points (entry_points.hpp).
#include "entry_points.hpp"

#include <functional>
#include <stdexcept>

#include "frontend/advise_options.hpp"
#include "frontend/regime_options.hpp"
#include "frontend/study_options.hpp"
#include "frontend/task_options.hpp"
#include "reproduce_options.hpp"

namespace kestrel {

namespace {

template <typename Options>
std::vector<OptionInfo> all(const OptionTable<Options>& t) {
  return describe(t, std::function<bool(const Option<Options>&)>());
}
std::vector<OptionInfo> study(StudyCommand c) {
  return describe(study_options(),
                  std::function<bool(const StudyOption&)>([c](const StudyOption& o) { return takes_list(o, c); }));
}
std::vector<OptionInfo> sweep_options_info() {
  std::vector<OptionInfo> out = study(StudyCommand::Sweep);
  for (auto& o : all(sweep_run_options())) out.push_back(std::move(o));
  return out;
}

const EntryInput kProgress = {"progress", "", "print the command line's progress lines on sys.stderr", "bool", "False"};
const EntryInput kForce = {"force", "force", "replace an existing output (the command line's --force)", "bool",
                           "False"};
const char* const kArray = "ArrayLike";

}  // namespace

const std::vector<EntryPoint>& entry_points() {
  static const std::vector<EntryPoint> t = {
      {.cli = "variance",
       .python = "variance_study",
       .help = "Exact variance of estimators over all pairs of sampled sets (CRT 5.1, DERF 5.1)",
       .options = [] { return study(StudyCommand::Variance); },
       .returns = "list[dict[str, Any]]",
       .writes = {Output::Variance}},
      {.cli = "estimators", .python = "", .help = "List the estimator families and their names", .returns = "None"},
      {.cli = "datasets",
       .python = "",
       .help = "List the data sets, where they are, and verify their sha256",
       .returns = "None"},
      {.cli = "sweep",
       .python = "sweep",
       .help = "Variance study over a grid of sigma, d, L and M (resumable, extendable)",
       .inputs = {{"out", "out", "the sweep's HDF5 file", "str | os.PathLike[str]"}},
       .keywords = {kProgress, kForce},
       .options = sweep_options_info,
       .returns = "list[dict[str, Any]]",
       .writes = {Output::Sweep}},
      {.cli = "reproduce",
       .python = "reproduce",
       .help = "Reproduce a paper figure/table: HDF5 + PNG + claims summary",
       .inputs = {{"name", "name", "the reproduction (or all)", "str"},
                  {"out", "out", "the output directory", "str | os.PathLike[str]"}},
       .keywords = {kProgress},
       .options = [] { return all(experiments::reproduce_option_table()); },
       .returns = "list[dict[str, Any]]",
       .writes = {Output::Reproduce, Output::Claims}},
      {.cli = "advise",
       .python = "advise",
       .help = "Which estimator, how many features and which number format for your own queries and keys",
       .inputs = {{"Q", "queries", "queries, one token per row ([L, d], [heads, L, d] or [layers, heads, L, d])",
                   kArray},
                  {"K", "keys", "keys, as the queries (the same d)", kArray},
                  {"V", "values", "values, one row per key (None: the normalisers)", "ArrayLike | None", "None"}},
       .keywords = {kProgress,
                    {"out", "out", "also write the HDF5 report (and its plot) here", "str | os.PathLike[str] | None",
                     "None"},
                    kForce},
       .options = [] { return all(advise_options()); },
       .returns = "dict[str, Any]",
       .writes = {Output::Advise, Output::AdviseHeads},
       .plot = "kestrel.advice"},
      {.cli = "",
       .python = "draw_regime",
       .help = "Draw the point sets X and Y of a data regime",
       .inputs = {{"name", "", "the regime", "str"},
                  {"d", "", "dimension", "int"},
                  {"L", "", "points per set", "int"},
                  {"sigma", "", "scale", "float"}},
       .options = [] { return all(draw_regime_option_table()); },
       .returns = "tuple[NDArray[np.float64], NDArray[np.float64]]"},
      {.cli = "",
       .python = "classify",
       .help = "Nadaraya-Watson classification of a UCI set with exact or random-feature kernels",
       .inputs = {{"set", "", "the UCI classification set", "str"},
                  {"estimator", "", "an estimator name (None: the exact kernel)", "str | None", "None"}},
       .options = [] { return all(classify_option_table()); },
       .returns = "dict[str, Any]"},
      {.cli = "",
       .python = "attention_error",
       .help = "Relative errors of random-feature attention against exact attention over independent draws",
       .inputs = {{"Q", "", "queries, one token per row", kArray},
                  {"K", "", "keys, one token per row", kArray},
                  {"V", "", "values, one row per key", kArray},
                  {"estimator", "", "an estimator name", "str"}},
       .options = [] { return all(attention_error_option_table()); },
       .returns = "dict[str, Any]"},
  };
  return t;
}

const EntryPoint& entry_point(std::string_view name) {
  for (const auto& e : entry_points())
    if (name == e.cli || name == e.python) return e;
  throw std::logic_error("no entry point named " + std::string(name));
}

}  // namespace kestrel
