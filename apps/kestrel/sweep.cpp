// `kestrel sweep`: a variance study over a grid of sigma, d, L and M (comma-separated lists, or a
// TOML config file via --config), resumable, writing one HDF5 file and optionally a JSON summary.
// Under mpirun/srun the grid is shared among the MPI ranks and rank 0 writes the outputs.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "analysis/sweep.hpp"
#include "commands.hpp"
#include "io/provenance.hpp"
#include "mpi.hpp"
#include "study_cli.hpp"

namespace kestrel::cli {

Action add_sweep(CLI::App& app, const Global& g) {
  struct Args {
    SweepOptions opt;
  };
  auto a = std::make_shared<Args>();
  auto study = add_study_options(app, StudyCommand::Sweep);
  // --out is required, but checked after the config is read (validate): a config's `out` key gets its own error first.
  auto io = add_output_options(
      app,
      {.out = "HDF5 output file, required (parts of an unfinished sweep are kept in FILE.parts/)",
       .force = "Replace an existing --out file (not needed to extend a finished sweep by grid values); discards the "
                "finished points of a sweep with other options",
       .json = "Print the summary as JSON on stdout"});
  auto& o = a->opt;  // the run controls; sweep_options() fills the rest
  app.add_option("--stop-after", o.stop_after, "Testing hook: stop after computing N grid points")
      ->group("");                                                                                  // hidden
  app.add_option("--stop-rank", o.stop_rank, "Testing hook: only this MPI rank stops")->group("");  // hidden
  app.add_flag("--stop-killed", o.stop_killed, "Testing hook: stop by SIGKILL")->group("");         // hidden
  return [a, study, io, &g] {
    const SweepOptions hooks = a->opt;
    a->opt = sweep_options(study_values(*study));
    a->opt.out = io->out;
    a->opt.force = io->force;
    a->opt.stop_after = hooks.stop_after, a->opt.stop_rank = hooks.stop_rank, a->opt.stop_killed = hooks.stop_killed;
    validate(a->opt);  // before MPI: every rank fails alike on bad input
    SweepGroup& group = process_group();
    nlohmann::json prov = provenance(g.command_line, to_json(a->opt));
    prov["mpi_ranks"] = group.size();
    const std::string who = group.size() > 1 ? fmt::format("rank {}/{}: ", group.rank(), group.size()) : "";
    const SweepReport rep = run_sweep(
        a->opt, prov, [&](const std::string& m) { progress(g, who + m); }, group);
    if (group.rank() != 0) return;  // rank 0 reports for all
    progress(g, fmt::format("wrote {} ({} grid points computed, {} resumed{})", a->opt.out, rep.computed, rep.resumed,
                            group.size() > 1 ? fmt::format(", {} MPI ranks", group.size()) : ""));
    if (!rep.undefined.empty()) progress(g, rep.undefined);
    if (io->json) {
      nlohmann::json j = {{"provenance", prov}, {"results", nlohmann::json::array()}};
      for (const auto& r : rep.rows) j["results"].push_back(sweep_json(r));
      std::cout << j.dump(2) << '\n';
    } else {
      for (const auto& r : rep.rows) {
        const std::string at = fmt::format("{:<10} d={:<4} L={:<6} M={:<5} sigma={:<6.3g}", r.estimator, r.dim,
                                           r.points, r.features, r.sigma);
        if (r.status != Status::Ok)
          std::cout << fmt::format("{} {}: {}\n", at, to_string(r.status), r.reason);
        else
          std::cout << fmt::format("{} mean log Var {:10.4f}  mean log(Var/K) {:10.4f}\n", at, r.mean_log_var,
                                   r.mean_log_rel_var);
      }
    }
  };
}

}  // namespace kestrel::cli
