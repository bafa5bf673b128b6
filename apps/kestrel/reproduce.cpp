// `kestrel reproduce NAME|all [--quick] --out DIR`: runs paper reproductions (experiments/), writing
// NAME.h5, NAME.png, NAME.claims.{json,md} into DIR and a table of claims on stdout.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "experiment.hpp"

namespace kestrel::cli {

Action add_reproduce(CLI::App& app, const Global& g) {
  struct Args {
    std::string name, out = "results", seed;
    experiments::Options opt;
  };
  auto a = std::make_shared<Args>();
  std::string names;
  for (const auto& e : experiments::all_experiments()) names += (names.empty() ? "" : ", ") + e.name;
  app.add_option("name", a->name, "Reproduction: " + names + ", or all")->required();
  app.add_option("--out", a->out, "Output directory")->capture_default_str();
  app.add_flag("--quick", a->opt.quick, "Reduced sizes (same code path), for tests and CI");
  app.add_option("--seed", a->seed, "Seed of all random draws")->default_str(std::to_string(a->opt.seed));
  app.add_option("--data-dir", a->opt.regime_options.data_dir,
                 "Data directory (default: $KESTREL_DATA_DIR or the repository's datasets/)");
  return [a, &g] {
    if (!a->seed.empty()) a->opt.seed = parse_uint("--seed", a->seed, 0, INT64_MAX);
    if (!a->opt.regime_options.data_dir.empty())
      require(std::filesystem::is_directory(a->opt.regime_options.data_dir), "--data-dir: '{}' is not a directory",
              a->opt.regime_options.data_dir);
    std::vector<const experiments::Experiment*> todo;
    if (a->name == "all")
      for (const auto& e : experiments::all_experiments()) todo.push_back(&e);
    else
      todo.push_back(&experiments::find_experiment(a->name));
    a->opt.progress = [&g](const std::string& m) { progress(g, m); };
    int failed = 0;
    for (const auto* e : todo) {
      const auto t0 = std::chrono::steady_clock::now();
      progress(g, "reproducing " + e->name + (a->opt.quick ? " (quick)" : ""));
      const auto claims = experiments::reproduce(*e, a->opt, a->out, g.command_line);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << fmt::format("== {}: {} ({:.0f} s) -> {}/{}.{{h5,png,claims.md}}\n", e->name, e->title, secs,
                               a->out, e->name);
      for (const auto& c : claims) {
        failed += !c.holds();
        const std::string claimed = c.relation == "~" ? fmt::format("~{:.3g}+-{:.2g}", c.claimed, c.tolerance)
                                                      : fmt::format("{}{:.3g}", c.relation, c.claimed);
        std::cout << fmt::format("  [{}] {}: {} = {:.3f} (claimed {}){}\n", c.holds() ? "ok" : "differs", c.source,
                                 c.quantity, c.measured, claimed, c.note.empty() ? "" : "  " + c.note);
      }
    }
    std::cout << fmt::format("{} claims differ from the papers (see the claims.md files for settings and notes)\n",
                             failed);
  };
}

}  // namespace kestrel::cli
