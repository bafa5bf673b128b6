// `kestrel sweep`: a variance study over a grid of sigma, d, L and M (comma-separated lists, or a
// TOML config file via --config), resumable, writing one HDF5 file and optionally a JSON summary.
// Under mpirun/srun the grid is shared among the MPI ranks and rank 0 writes the outputs.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "analysis/sweep.hpp"
#include "commands.hpp"
#include "mpi.hpp"
#include "io/provenance.hpp"

namespace kestrel::cli {

Action add_sweep(CLI::App& app, const Global& g) {
  struct Args {
    SweepOptions opt;
    std::string kernel = "softmax", preprocess = "raw";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto& o = a->opt;
  auto& b = o.base;
  app.add_option("--regime", b.regime, "Sampling regime (as in `kestrel variance`)")->capture_default_str();
  app.add_option("--sigma", o.sigmas, "Scales sigma, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--dim", o.dims, "Dimensions d, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--points", o.points, "Points per set L, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--features", o.features, "Numbers of features M, comma-separated")->delimiter(',')
      ->capture_default_str();
  app.add_option("--pairs", b.pairs, "Number of (X, Y) set pairs")->capture_default_str();
  app.add_option("--seed", b.seed, "Seed of all random draws")->capture_default_str();
  app.add_option("--estimators", b.estimators, "Estimators, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--kernel", a->kernel, "softmax, gaussian or scaled:<alpha>")->capture_default_str();
  app.add_option("--preprocess", a->preprocess, "Image pixels: raw, center or standardize")->capture_default_str();
  app.add_option("--data-dir", b.regime_options.data_dir, "Data directory");
  app.add_option("--spectrum", b.regime_options.spectrum, "aniso spectrum")->capture_default_str();
  app.add_flag("--halve-real", b.halve_real, "Give real-valued estimators 2M features (CRT 9.10.1)");
  app.add_option("--out", o.out, "HDF5 output file (parts of an unfinished sweep are kept in FILE.parts/)")
      ->required();
  app.add_flag("--force", o.force, "Replace an existing --out file");
  app.add_flag("--json", a->json, "Print the summary as JSON on stdout");
  app.add_option("--stop-after", o.stop_after, "Testing hook: stop after computing N grid points")
      ->group("");  // hidden
  app.add_option("--stop-rank", o.stop_rank, "Testing hook: only this MPI rank stops")->group("");  // hidden
  app.add_flag("--stop-killed", o.stop_killed, "Testing hook: stop by SIGKILL")->group("");        // hidden
  return [a, &g] {
    a->opt.base.kernel = Kernel::parse(a->kernel);
    a->opt.base.regime_options.preprocess = parse_preprocess(a->preprocess);
    validate(a->opt);  // before MPI: every rank fails alike on bad input
    SweepGroup& group = process_group();
    nlohmann::json prov = provenance(g.command_line, to_json(a->opt));
    prov["mpi_ranks"] = group.size();
    const std::string who = group.size() > 1 ? fmt::format("rank {}/{}: ", group.rank(), group.size()) : "";
    const SweepReport rep = run_sweep(a->opt, prov, [&](const std::string& m) { progress(g, who + m); }, group);
    if (group.rank() != 0) return;  // rank 0 reports for all
    progress(g, fmt::format("wrote {} ({} grid points computed, {} resumed{})", a->opt.out, rep.computed, rep.resumed,
                            group.size() > 1 ? fmt::format(", {} MPI ranks", group.size()) : ""));
    if (!rep.undefined.empty()) progress(g, rep.undefined);
    if (a->json) {
      nlohmann::json j = {{"provenance", prov}, {"results", nlohmann::json::array()}};
      for (const auto& r : rep.rows) {
        nlohmann::json e = r.result;
        e["dim"] = r.dim, e["points"] = r.points, e["features"] = r.features;
        j["results"].push_back(e);
      }
      std::cout << j.dump(2) << '\n';
    } else {
      for (const auto& r : rep.rows) {
        if (r.result["status"] != "ok") {
          std::cout << fmt::format("{:<10} d={:<4} L={:<6} M={:<5} sigma={:<6.3g} {}: {}\n", r.estimator, r.dim,
                                   r.points, r.features, r.sigma, r.result["status"].get<std::string>(),
                                   r.result["reason"].get<std::string>());
          continue;
        }
        std::cout << fmt::format("{:<10} d={:<4} L={:<6} M={:<5} sigma={:<6.3g} mean log Var {:10.4f}  mean "
                                 "log(Var/K) {:10.4f}\n",
                                 r.estimator, r.dim, r.points, r.features, r.sigma,
                                 r.result["mean_log_var"].get<double>(), r.result["mean_log_rel_var"].get<double>());
      }
    }
  };
}

}  // namespace kestrel::cli
