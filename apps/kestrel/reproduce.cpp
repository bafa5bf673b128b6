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
#include "option_cli.hpp"
#include "reproduce_options.hpp"

namespace kestrel::cli {

namespace {

// One reproduction run and its claims printed; the index page is rewritten after it, so that an interrupted `all`
// leaves a page of what is done.
int run_one(const experiments::Experiment& e, const experiments::Options& opt, const std::string& out,
            const Global& g) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto claims = experiments::reproduce(e, opt, out, g.command_line);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("== {}: {} ({:.0f} s) -> {}/{}.{{h5,png,claims.md}}\n", e.name, e.title, secs, out, e.name);
  int failed = 0;
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
  experiments::update_index(out);
  return failed;
}

}  // namespace

Action add_reproduce(CLI::App& app, const Global& g) {
  struct Args {
    std::string name;
    std::shared_ptr<TableArgs> table;
    std::shared_ptr<OutputArgs> io;
  };
  auto a = std::make_shared<Args>();
  app.add_option("name", a->name, "Reproduction: " + experiments::reproduction_names())->required();
  a->io = add_output_options(app, {.out = "Output directory", .force = "", .json = ""});
  a->io->out = "results";
  a->io->out_option->capture_default_str();
  a->table = add_table(app, experiments::reproduce_option_table());
  return [a, &g] {
    experiments::Options opt;
    const auto todo = experiments::reproduction_request(a->name, given_values(*a->table), opt);
    experiments::check_outputs(a->io->out, todo, opt.replace);  // before computing anything
    experiments::check_index_page(a->io->out, opt.replace);
    opt.progress = [&g](const std::string& m) { progress(g, m); };
    int failed = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const double so_far = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress(g,
               fmt::format("{}/{} reproducing {}{}{}", i + 1, todo.size(), todo[i]->name, opt.quick ? " (quick)" : "",
                           i ? fmt::format(" (ETA {:.0f} min at the mean time so far)",
                                           so_far / i * static_cast<double>(todo.size() - i) / 60)
                             : ""));
      failed += run_one(*todo[i], opt, a->io->out, g);
    }
    std::cout << fmt::format(
        "{} claims not reproduced (differs or contradicted; see the claims.md files for settings and notes)\n", failed);
    std::cout << fmt::format("all results on one page: {}\n",
                             std::filesystem::absolute(std::filesystem::path(a->io->out) / "index.html").string());
  };
}

}  // namespace kestrel::cli
