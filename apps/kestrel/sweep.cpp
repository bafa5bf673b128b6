// `kestrel sweep`: a variance study over a grid of sigma, d, L and M (comma-separated lists, or a
// TOML config file via --config), resumable, writing one HDF5 file and optionally a JSON summary.
// Under mpirun/srun the grid is shared among the MPI ranks and rank 0 writes the outputs; with --shard (or in a Slurm
// job array) this run computes one shard of the grid and `kestrel sweep merge OUT` writes the file.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/sweep.hpp"
#include "commands.hpp"
#include "io/provenance.hpp"
#include "mpi.hpp"
#include "study_cli.hpp"

namespace kestrel::cli {

namespace {

// The sweep's fault injection for the resume tests (tests/cli_test.cpp, bad_inputs_test.cpp, mpi/, slurm/): not an
// option a user sees but an environment switch the tests set, KESTREL_TEST_SWEEP_STOP=after=N[,rank=R][,killed|paused]:
// stop (an error) after computing N grid points, on MPI rank R only, by SIGKILL, or waiting for a signal.
void apply_test_stop(SweepOptions& o) {
  const char* v = std::getenv("KESTREL_TEST_SWEEP_STOP");
  if (!v || !*v) return;
  const std::string where = fmt::format("KESTREL_TEST_SWEEP_STOP='{}'", v);
  std::stringstream parts(v);
  for (std::string part; std::getline(parts, part, ',');) {
    if (part == "killed")
      o.stop_killed = true;
    else if (part == "paused")
      o.stop_paused = true;
    else if (part.rfind("after=", 0) == 0)
      o.stop_after = parse_uint(where + " after", part.substr(6), 1, 1u << 30);
    else if (part.rfind("rank=", 0) == 0)
      o.stop_rank = static_cast<int>(parse_uint(where + " rank", part.substr(5), 0, 1u << 30));
    else
      throw InvalidArgument(
          fmt::format("{}: unknown part '{}' (a testing hook: after=N[,rank=R][,killed|paused])", where, part));
  }
  require(o.stop_after > 0, "{}: needs after=N (a testing hook: after=N[,rank=R][,killed|paused])", where);
}

// "  MC log Var -1.3970" and the row's verdict (as `kestrel variance` marks it), or "" without --mc.
std::string mc_text(const ResultRow& r, Sampler sampler) {
  if (!r.mc) return "";
  return fmt::format("  MC log Var {:10.4f}{}", r.mc->mean_log_var, mc_mark(r, sampler));
}

// The summary on stdout: one line per row (with the Monte Carlo column and verdict of --mc, as `kestrel variance`), or
// the JSON document of --json; the verdicts' warning on stderr either way.
void print_rows(const SweepReport& rep, const nlohmann::json& prov, bool json, Sampler sampler) {
  std::cerr << mc_verdict(rep.rows, sampler);
  if (json) {
    nlohmann::json j = {{"provenance", prov}, {"results", nlohmann::json::array()}};
    stamp_schema(j, Output::Sweep);
    for (const auto& r : rep.rows) j["results"].push_back(sweep_json(r));
    std::cout << j.dump(2) << '\n';
    return;
  }
  for (const auto& r : rep.rows) {
    const std::string at =
        fmt::format("{:<10} d={:<4} L={:<6} M={:<5} sigma={:<6.3g}", r.estimator, r.dim, r.points, r.features, r.sigma);
    if (r.status != Status::Ok)
      std::cout << fmt::format("{} {}: {}\n", at, to_string(r.status), r.reason);
    else
      std::cout << fmt::format("{} mean log Var {:10.4f}  mean log(Var/K) {:10.4f}{}\n", at, r.mean_log_var,
                               r.mean_log_rel_var, mc_text(r, sampler));
  }
}

// `kestrel sweep merge OUT`: the file from the parts of the shards.
Action add_merge(CLI::App& sweep, const Global& g) {
  CLI::App* merge = sweep.add_subcommand(
      "merge",
      "Write OUT from the grid points the shards (--shard, or Slurm array tasks) left in OUT.parts/; exit 3 naming "
      "the missing grid points when some are missing");
  auto out = std::make_shared<std::string>();
  merge->add_option("OUT", *out, "The sweep's --out file")->required();
  auto io = add_output_options(*merge, {.out = "",
                                        .force = "Replace an existing OUT (not needed to extend a finished sweep)",
                                        .json = "Print the summary as JSON on stdout"});
  return [&sweep, out, io, &g] {
    for (const CLI::Option* o : sweep.get_options())
      if (o->count() > 0 && o != sweep.get_help_ptr())
        throw InvalidArgument(fmt::format(
            "{} is an option of the sweep, not of `kestrel sweep merge` (which takes OUT, --force and --json): the "
            "options were recorded by the shards",
            o->get_name()));
    const SweepReport rep = merge_sweep(*out, io->force);
    progress(g, fmt::format("wrote {} ({} grid points from the shards {})", *out, rep.total,
                            fmt::join(rep.provenance.at("shards").get<std::vector<std::string>>(), ", ")));
    if (!rep.undefined.empty()) progress(g, rep.undefined);
    print_rows(rep, rep.provenance, io->json,
               parse_sampler(rep.provenance.at("options").value("sampler", std::string("iid"))));
  };
}

}  // namespace

Action add_sweep(CLI::App& app, const Global& g) {
  struct Args {
    SweepOptions opt;
  };
  auto a = std::make_shared<Args>();
  auto study = add_study_options(app, StudyCommand::Sweep);
  auto run = add_table(app, sweep_run_options());
  // --out is required, but checked after the config is read (validate): a config's `out` key gets its own error first.
  auto io = add_output_options(
      app,
      {.out = "HDF5 output file, required (parts of an unfinished sweep are kept in FILE.parts/)",
       .force = "Replace an existing --out file (not needed to extend a finished sweep by grid values); discards the "
                "finished points of a sweep with other options",
       .json = "Print the summary as JSON on stdout"});
  Action merge = add_merge(app, g);
  return [a, study, run, io, merge, &app, &g] {
    if (app.got_subcommand("merge")) return merge();
    a->opt = sweep_options(study_values(*study));
    apply_sweep_run(given_values(*run), a->opt, [](const char* v) { return std::getenv(v); });
    a->opt.out = io->out;
    a->opt.force = io->force;
    apply_test_stop(a->opt);
    validate(a->opt);  // before MPI: every rank fails alike on bad input
    if (a->opt.base.regime == "file")
      note_layout({a->opt.base.regime_options.x_file, a->opt.base.regime_options.y_file});
    const bool sharded = a->opt.shard.count > 0;
    SweepGroup& group = process_group();
    // The shard is how this run takes part, not what it computes: the merged file records the sweep's command.
    const std::string command = std::regex_replace(g.command_line, std::regex(" --shard[= ][^ ]*"), "");
    nlohmann::json prov = provenance(command, a->opt.recorded, study_inputs(a->opt.base));
    prov["mpi_ranks"] = group.size();
    std::string who = sharded ? fmt::format("shard {}: ", to_string(a->opt.shard)) : "";
    if (group.size() > 1) who += fmt::format("rank {}/{}: ", group.rank(), group.size());
    const SweepReport rep = run_sweep(
        a->opt, prov, [&](const std::string& m) { progress(g, who + m); }, group);
    if (group.rank() != 0) return;  // rank 0 reports for all
    const std::string ranks = group.size() > 1 ? fmt::format(", {} MPI ranks", group.size()) : "";
    if (sharded)
      progress(g, fmt::format(
                      "shard {}: {} grid points computed, {} resumed{}; {} of the sweep's {} grid points are "
                      "finished in {}.parts/{}",
                      to_string(a->opt.shard), rep.computed, rep.resumed, ranks, rep.finished, rep.total, a->opt.out,
                      rep.finished == rep.total ? fmt::format("; `kestrel sweep merge {}` writes the file", a->opt.out)
                                                : ""));
    else
      progress(g, fmt::format("wrote {} ({} grid points computed, {} resumed{})", a->opt.out, rep.computed, rep.resumed,
                              ranks));
    if (!rep.undefined.empty()) progress(g, rep.undefined);
    print_rows(rep, prov, io->json, a->opt.base.sampler);
  };
}

}  // namespace kestrel::cli
