// kestrel: the command line over the library. `kestrel --help` lists the subcommands.
#include <iostream>
#include <map>
#include <memory>

#include <oneapi/tbb/global_control.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "io/output.hpp"

namespace kestrel::cli {
void progress(const Global& g, const std::string& msg) {
  if (!g.quiet) std::cerr << "[kestrel] " << msg << '\n';
}
}  // namespace kestrel::cli

int main(int argc, char** argv) {
  using namespace kestrel::cli;
  kestrel::single_threaded_blas();
  kestrel::keep_freed_memory();
  kestrel::install_cleanup_on_signals();  // SIGINT/SIGTERM remove temporary output files
  Global g;
  for (int i = 0; i < argc; ++i) g.command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{"kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the "
               "softmax and Gaussian kernels"};
  app.require_subcommand(1);
  app.fallthrough();  // global options (--threads, --quiet) may follow the subcommand
  app.add_option("--threads", g.threads, "Worker threads (0 = all cores); results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", g.quiet, "No progress messages on stderr");
  app.set_config("--config", "",
                 "Read options from a TOML file: a subcommand's options go under its [section], e.g. [sweep] "
                 "sigma = [0.5, 1.0]");

  std::map<CLI::App*, Action> actions;
  auto add = [&](const char* name, const char* help, Action (*make)(CLI::App&, const Global&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    actions[sub] = make(*sub, g);
  };
  add("variance", "Exact variance of estimators over all pairs of sampled sets (CRT 5.1, DERF 5.1)", add_variance);
  add("estimators", "List the estimator families and their names", add_estimators);
  add("datasets", "List the data sets, where they are, and verify their sha256", add_datasets);
  add("sweep", "Variance study over a grid of sigma, d, L and M (resumable)", add_sweep);
  add("reproduce", "Reproduce a paper figure/table: HDF5 + PNG + claims summary", add_reproduce);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "kestrel: error: " << e.what() << " (see --help)\n";
    return 2;
  }
  try {
    std::unique_ptr<tbb::global_control> limit;
    if (g.threads > 0)
      limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, g.threads);
    for (auto& [sub, action] : actions)
      if (sub->parsed()) action();
  } catch (const kestrel::InvalidArgument& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kestrel: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
