// `kestrel reproduce NAME|all [--quick] --out DIR`: runs paper reproductions (experiments/), writing
// NAME.h5, NAME.png, NAME.claims.{json,md} into DIR and a table of claims on stdout, and keeps DIR/index.html (every
// reproduction in DIR on one page) up to date after each one.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "experiment.hpp"
#include "io/output.hpp"

namespace kestrel::cli {

Action add_reproduce(CLI::App& app, const Global& g) {
  struct Args {
    std::string name, out = "results", seed, rows;
    experiments::Options opt;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  std::string names;
  for (const auto& e : experiments::all_experiments()) names += (names.empty() ? "" : ", ") + e.name;
  app.add_option("name", a->name, "Reproduction: " + names + ", or all")->required();
  app.add_option("--out", a->out, "Output directory")->capture_default_str();
  app.add_flag("--force", a->force, "Replace existing outputs of these reproductions in --out");
  app.add_flag("--quick", a->opt.quick, "Reduced sizes (same code path), for tests and CI");
  app.add_option("--seed", a->seed, "Seed of all random draws")->default_str(std::to_string(a->opt.seed));
  std::string protocols;
  for (const auto& e : experiments::all_experiments()) {
    if (e.protocols.empty()) continue;
    protocols += fmt::format("{}{}: ", protocols.empty() ? "" : "; ", e.name);
    for (std::size_t i = 0; i < e.protocols.size(); ++i)
      protocols += (i ? ", " : "") + e.protocols[i].name + (i ? "" : " (default)");
  }
  app.add_option("--protocol", a->opt.protocol,
                 "Reading of the paper's protocol, for one reproduction that offers several (" + protocols + ")");
  std::string takes_rows;
  for (const auto& e : experiments::all_experiments())
    if (e.query_rows) takes_rows += (takes_rows.empty() ? "" : ", ") + e.name;
  app.add_option("--rows", a->rows,
                 "Query rows sampled with --seed for the exact per-row predictions over all queries, or all (" +
                     takes_rows + ")")
      ->default_str("all");
  app.add_option("--data-dir", a->opt.regime_options.data_dir,
                 "Data directory (default: $KESTREL_DATA_DIR or the repository's datasets/)");
  return [a, &g, takes_rows] {
    if (!a->seed.empty()) a->opt.seed = parse_uint("--seed", a->seed, 0, INT64_MAX);
    if (!a->opt.regime_options.data_dir.empty())
      require(std::filesystem::is_directory(a->opt.regime_options.data_dir), "--data-dir: '{}' is not a directory",
              a->opt.regime_options.data_dir);
    std::vector<const experiments::Experiment*> todo;
    if (a->name == "all")
      for (const auto& e : experiments::all_experiments()) todo.push_back(&e);
    else
      todo.push_back(&experiments::find_experiment(a->name));
    if (!a->opt.protocol.empty()) {
      require(a->name != "all", "--protocol '{}' needs one reproduction, not all", a->opt.protocol);
      experiments::resolve_protocol(*todo.front(), a->opt.protocol);  // an unknown protocol stops here
    }
    if (!a->rows.empty() && a->rows != "all") {
      a->opt.rows = parse_uint("--rows", a->rows, 1, INT64_MAX);
      for (const auto* e : todo) {
        require(e->query_rows || a->name == "all", "--rows {}: {} takes no row sample (only {})", a->rows, e->name,
                takes_rows);
        if (e->query_rows)
          require(a->opt.rows <= e->query_rows(a->opt),
                  "--rows {} exceeds the {} query rows of {} (give at most {} or all)", a->rows, e->query_rows(a->opt),
                  e->name, e->query_rows(a->opt));
      }
    }
    experiments::check_outputs(a->out, todo, a->force);  // before computing anything
    a->opt.replace = a->force;
    a->opt.progress = [&g](const std::string& m) { progress(g, m); };
    int failed = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const auto* e = todo[i];
      const auto t0 = std::chrono::steady_clock::now();
      const double so_far = std::chrono::duration<double>(t0 - start).count();
      progress(g, fmt::format("{}/{} reproducing {}{}{}", i + 1, todo.size(), e->name, a->opt.quick ? " (quick)" : "",
                              i ? fmt::format(" (ETA {:.0f} min at the mean time so far)",
                                              so_far / i * static_cast<double>(todo.size() - i) / 60)
                                : ""));
      const auto claims = experiments::reproduce(*e, a->opt, a->out, g.command_line);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << fmt::format("== {}: {} ({:.0f} s) -> {}/{}.{{h5,png,claims.md}}\n", e->name, e->title, secs, a->out,
                               e->name);
      for (const auto& c : claims) {
        failed += !c.holds();
        const std::string v = c.verdict();
        const std::string claimed =
            c.relation == "~"
                ? fmt::format("~{}+-{}", experiments::format_number(c.claimed), experiments::format_number(c.tolerance))
                : fmt::format("{}{}", c.relation, experiments::format_number(c.claimed));
        std::cout << fmt::format("  [{}] {}: {} = {} (claimed {}){}\n", v, c.source, c.quantity,
                                 experiments::format_number(c.measured), claimed, c.note.empty() ? "" : "  " + c.note);
      }
      // After each reproduction, so that an interrupted `all` leaves a page of what is done.
      experiments::update_index(a->out);
    }
    std::cout << fmt::format(
        "{} claims not reproduced (differs or contradicted; see the claims.md files for settings and notes)\n", failed);
    std::cout << fmt::format("all results on one page: {}\n",
                             std::filesystem::absolute(std::filesystem::path(a->out) / "index.html").string());
  };
}

}  // namespace kestrel::cli
