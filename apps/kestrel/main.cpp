// kestrel: the command line over the library. `kestrel --help` lists the subcommands, `kestrel --version`
// prints the version, git revision, library versions and the schemas of its outputs. Exit codes: 0 success, 2 invalid
// input (a one-line error naming the value; nothing written), 3 a result that cannot be made yet (`kestrel sweep merge`
// with grid points missing), 1 any other failure.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include <unistd.h>

#include <oneapi/tbb/global_control.h>
#include <toml++/toml.h>

#include "commands.hpp"
#include "core/blas_core.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/parse.hpp"
#include "data/points_file.hpp"
#include "entry_points.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"

namespace kestrel::cli {
void progress(const Global& g, const std::string& msg) {
  if (!g.quiet) std::cerr << "[kestrel] " << msg << '\n';
}

void note_layout(const std::vector<std::string>& files) {
  for (const auto& f : files)
    if (!f.empty())
      if (const std::string note = layout_note(*load_points(f)); !note.empty())
        std::cerr << "[kestrel] warning: " << note << '\n';
}
}  // namespace kestrel::cli

namespace {

void print_version() {
  nlohmann::json libs = nlohmann::json::parse(kestrel::library_versions());
  libs["cli11"] = CLI11_VERSION;
  libs["tomlplusplus"] = fmt::format("{}.{}.{}", TOML_LIB_MAJOR, TOML_LIB_MINOR, TOML_LIB_PATCH);
  std::cout << "kestrel " << kestrel::kestrel_version() << " (git " << kestrel::git_revision() << ")\n";
  for (const auto& [name, v] : libs.items())
    std::cout << "  " << name << ' ' << (v.is_string() ? v.get<std::string>() : v.dump()) << '\n';
  std::cout << "schemas of its outputs (a reader refuses a newer major version):\n";
  for (const auto& s : kestrel::schemas()) std::cout << "  " << s.name << ' ' << kestrel::version_text(s) << '\n';
}

// Names of the long options of a subcommand (and the app's), for "did you mean".
std::vector<std::string> long_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a; a = a->get_parent())
    for (const CLI::Option* o : a->get_options())
      for (const auto& n : o->get_lnames()) names.push_back("--" + n);
  return names;
}

std::string repeated_option(int argc, char** argv);

// CLI11's "The following arguments were not expected: 1 --sigmaa" becomes "unknown option '--sigmaa' for
// `kestrel variance`; did you mean '--sigma'?" when an unknown long option is the cause.
std::string explain(const CLI::ParseError& e, CLI::App& app, int argc, char** argv) {
  CLI::App* sub = nullptr;
  for (int i = 1; i < argc && !sub; ++i)
    if (argv[i][0] != '-')
      for (CLI::App* s : app.get_subcommands({}))
        if (s->get_name() == argv[i]) sub = s;
  const std::vector<std::string> known = long_names(sub ? sub : &app);
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.rfind("--", 0) != 0) continue;
    const std::string flag = w.substr(0, w.find('='));
    if (std::find(known.begin(), known.end(), flag) != known.end()) continue;
    return fmt::format("unknown option '{}'{}{}", flag, sub ? fmt::format(" for `kestrel {}`", sub->get_name()) : "",
                       kestrel::did_you_mean(flag, known));
  }
  if (std::string(e.what()).find("At Most") != std::string::npos)
    if (const std::string twice = repeated_option(argc, argv); !twice.empty()) return twice;
  return e.what();
}

// CLI11's "At Most 1 required but received 2" becomes "--sigma is given twice ('0.5' and '1'); ...".
std::string repeated_option(int argc, char** argv) {
  std::map<std::string, std::string> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.rfind("--", 0) != 0) continue;
    const auto eq = w.find('=');
    const std::string name = w.substr(0, eq);
    const std::string value = eq != std::string::npos ? w.substr(eq + 1) : (i + 1 < argc ? argv[i + 1] : "");
    if (auto it = seen.find(name); it != seen.end())
      return fmt::format("{} is given twice ('{}' and '{}'); give it once (lists are comma-separated)", name,
                         it->second, value);
    seen[name] = value;
  }
  return "";
}

// Every flag of every subcommand takes no value or an explicit boolean (`--json`, `--json=false`): CLI11 alone reads
// `--full-curve=2` as true. Applied once to the whole tree of options, so a flag added anywhere is covered.
void strict_flags(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o == app.get_help_ptr() || o == app.get_help_all_ptr() || o->get_expected_min() != 0) continue;
    o->check(
        [](const std::string& v) {
          static const std::vector<std::string> ok = {"true", "false", "1", "0", "yes", "no", "on", "off"};
          return std::find(ok.begin(), ok.end(), v) != ok.end()
                     ? std::string()
                     : fmt::format("a flag takes no value or one of true, false, 1, 0, yes, no, on, off; got '{}'", v);
        },
        "", "strict-flag");
  }
  for (CLI::App* sub : app.get_subcommands({})) strict_flags(*sub);
}

// `kestrel options --json` (hidden): what every subcommand offers, read back from the registered options themselves
// (name, default as shown by --help, flag or not, required), for the parity test of the command line, TOML and Python
// (tests/option_parity_test.py).
void print_options(const CLI::App& app) {
  auto options_of = [](const CLI::App* sub) {
    nlohmann::json opts = nlohmann::json::array();
    for (const CLI::Option* o : sub->get_options()) {
      if (o == sub->get_help_ptr() || o == sub->get_help_all_ptr() || o == sub->get_version_ptr()) continue;
      const bool positional = o->get_lnames().empty();
      opts.push_back({{"name", positional ? o->get_name() : o->get_lnames().front()},
                      {"positional", positional},
                      {"flag", o->get_expected_min() == 0},
                      {"required", o->get_required()},
                      {"hidden", o->get_group().empty()},
                      {"default", o->get_default_str()},
                      {"help", o->get_description()}});
    }
    return opts;
  };
  // Each subcommand's options by name ("sweep merge" for a nested one); what each does under "descriptions" and the
  // options taken before any subcommand under "global" (the docs' command-line reference is generated from this).
  nlohmann::json out = nlohmann::json::object(), descriptions = nlohmann::json::object();
  std::function<void(const CLI::App*, const std::string&)> walk = [&](const CLI::App* sub, const std::string& name) {
    out[name] = options_of(sub);
    descriptions[name] = sub->get_description();
    for (const CLI::App* s : sub->get_subcommands({})) walk(s, name + " " + s->get_name());
  };
  for (const CLI::App* sub : app.get_subcommands({}))
    if (!sub->get_group().empty()) walk(sub, sub->get_name());  // not the hidden `options` itself
  out["descriptions"] = descriptions;
  out["global"] = options_of(&app);
  std::cout << out.dump(2) << '\n';
}

// The first word that is not an option (or the value of --threads) must be a subcommand; false (with the error on
// stderr) when it is not.
bool subcommand_first(int argc, char** argv, const std::vector<std::string>& names) {
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--threads") {
      ++i;
      continue;
    }
    if (w.rfind("-", 0) == 0) continue;
    if (std::find(names.begin(), names.end(), w) == names.end() && w != "options") {
      // `kestrel --config FILE sweep`: the word after a subcommand's option is its value, not a subcommand.
      const std::string prev = i > 1 ? argv[i - 1] : "";
      if (prev.rfind("--", 0) == 0 && prev != "--version" && prev != "--help")
        std::cerr << fmt::format(
            "kestrel: error: '{}' comes before the subcommand: options go after it, as in "
            "`kestrel SUBCOMMAND {} {}` (subcommands: {})\n",
            prev, prev, w, fmt::join(names, ", "));
      else
        std::cerr << fmt::format("kestrel: error: unknown subcommand '{}'{} (subcommands: {})\n", w,
                                 kestrel::did_you_mean(w, names), fmt::join(names, ", "));
      return false;
    }
    break;
  }
  return true;
}

// Runs the parsed subcommand's action; exit code 2 for invalid input, 3 for an incomplete result, 1 for any other
// failure.
int run(const std::map<CLI::App*, kestrel::cli::Action>& actions, const std::string& threads, kestrel::cli::Global& g) {
  try {
    g.threads = threads.empty() ? 0 : static_cast<int>(kestrel::parse_uint("--threads", threads, 0, 4096));
    std::unique_ptr<tbb::global_control> limit;
    if (g.threads > 0)
      limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, g.threads);
    for (auto& [sub, action] : actions)
      if (sub->parsed()) action();
  } catch (const kestrel::InvalidArgument& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 2;
  } catch (const kestrel::InputFileError& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 2;
  } catch (const kestrel::Incomplete& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kestrel::cli;
  // OpenBLAS chose its kernels when it was loaded, before main. On a CPU it could not identify (its generic Prescott
  // kernels) the program starts again with OPENBLAS_CORETYPE set to the core the CPU supports (core/blas_core.hpp);
  // set then, it is not changed again, and a value the user set is kept.
  if (const std::string core = kestrel::openblas_core_to_set(); !core.empty()) {
    ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    ::execv("/proc/self/exe", argv);  // returns only if it failed: run on with the generic kernels
  }
  kestrel::single_threaded_blas();
  kestrel::keep_freed_memory();
  kestrel::install_cleanup_on_signals();  // SIGINT/SIGTERM remove temporary output files
  Global g;
  for (int i = 0; i < argc; ++i) g.command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{
      "kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the "
      "softmax and Gaussian kernels"};
  app.name("kestrel");  // usage lines say `kestrel`, not the path it was started by
  app.require_subcommand(1);
  app.fallthrough();  // global options (--threads, --quiet) may follow the subcommand
  std::string threads;
  app.add_option("--threads", threads, "Worker threads (0 = all cores); results do not depend on it")->default_str("0");
  app.add_flag("--quiet", g.quiet, "No progress messages on stderr");
  app.add_flag_callback(
      "--version",
      [] {
        print_version();
        throw CLI::Success();
      },
      "Print the version, git revision and library versions");

  std::map<CLI::App*, Action> actions;
  std::vector<std::string> names;
  auto add = [&](const char* name, const char* help, Action (*make)(CLI::App&, const Global&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    actions[sub] = make(*sub, g);
    names.push_back(name);
  };
  // The subcommands: the declared entry points with a command-line name (experiments/entry_points.hpp), in order,
  // each wired by its add_ function.
  const std::map<std::string_view, Action (*)(CLI::App&, const Global&)> wiring = {
      {"variance", add_variance}, {"estimators", add_estimators}, {"datasets", add_datasets},
      {"sweep", add_sweep},       {"reproduce", add_reproduce},   {"advise", add_advise}};
  for (const auto& e : kestrel::entry_points()) {
    if (!*e.cli) continue;
    const auto w = wiring.find(e.cli);
    if (w == wiring.end()) throw std::logic_error(std::string("entry point without a subcommand: ") + e.cli);
    add(e.cli, e.help, w->second);
  }

  // Hidden: not in --help nor among the subcommands named in errors.
  CLI::App* options = app.add_subcommand("options", "Print every subcommand's options as JSON (for tests)")->group("");
  bool options_json = false;
  options->add_flag("--json", options_json, "JSON (the only format)");
  actions[options] = [&app] { print_options(app); };

  strict_flags(app);

  if (argc == 1) {  // bare `kestrel`: usage, and an error exit (nothing was asked)
    std::cerr << app.help();
    return 2;
  }
  if (!subcommand_first(argc, argv, names)) return 2;

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "kestrel: error: " << explain(e, app, argc, argv) << " (see --help)\n";
    return 2;
  }
  return run(actions, threads, g);
}
