// `kestrel advise`: which estimator, how many features and which number format for the user's own queries, keys and
// values (tasks/advise.hpp); a table on stdout (or --json), and with --out an HDF5 report and a PNG beside it.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "data/points_file.hpp"
#include "frontend/advise_options.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"
#include "option_cli.hpp"
#include "tasks/advise.hpp"

namespace kestrel::cli {

namespace {

struct Args {
  std::string queries, keys, values;
  bool values_given = false;
  std::shared_ptr<TableArgs> table;
  std::shared_ptr<OutputArgs> io;
};

std::string pct(double v) { return fmt::format("{:.3g}%", 100 * v); }

void print_report(const Advice& a) {
  const auto& o = a.options;
  std::cout << fmt::format("inputs: d={} Lq={} Lk={} dv={}  scaling={}  kernel={}  target={}  budget={}\n", a.d, a.Lq,
                           a.Lk, a.dv, o.scale_sqrt_d ? "sqrt-d (logits q.k/sqrt(d))" : "none (logits q.k)",
                           o.kernel.name(), pct(o.target), o.budget);
  std::cout << fmt::format("error of {} ({} rows sampled, seed {})\n", a.quantity_label, a.sampled_rows.n_elem, o.seed);
  std::cout << fmt::format("{:<22} {:<9} {:>9} {:>9} {:>9} {:>9} {:>10}  {:<24}{}\n", "estimator", "method", "e(1) med",
                           "e(1) p95", "M med", "M p95", "e(M) p95", "fp16 raw / stabilised",
                           o.validate ? "  measured p95 +- SE" : "");
  std::map<std::string, std::vector<std::string>> skipped;  // reason -> estimators (samplers) it applies to
  for (const auto& r : a.rows) {
    const std::string label = r.sampler == "iid" || r.sampler == "any" ? r.estimator : r.estimator + " " + r.sampler;
    if (r.status != "ok") {
      auto& who = skipped[r.status + ": " + r.reason];
      if (std::find(who.begin(), who.end(), r.estimator) == who.end())
        who.push_back(r.sampler == "iid" || r.sampler == "any" ? r.estimator : label);
      continue;
    }
    auto m = [&](arma::uword v) { return v ? std::to_string(v) : "> " + std::to_string(o.budget); };
    std::string fp16 = "-";
    if (r.range)
      for (std::size_t k = 0; k < number_formats().size(); ++k)
        if (number_formats()[k].name == "fp16")
          fp16 = (r.range->verdict[k].first == "ok"
                      ? "ok"
                      : r.range->verdict[k].first.substr(0, r.range->verdict[k].first.find(':'))) +
                 " / " +
                 (r.range->verdict[k].second == "ok" || r.range->verdict[k].second == "n/a"
                      ? r.range->verdict[k].second
                      : r.range->verdict[k].second.substr(0, r.range->verdict[k].second.find(':')));
    std::cout << fmt::format("{:<22} {:<9} {:>9} {:>9} {:>9} {:>9} {:>10}  {:<24}", label,
                             r.method.substr(0, r.method.find(' ')), pct(r.err1_median), pct(r.err1_p95), m(r.m_median),
                             m(r.m_p95), pct(r.at_m_p95), fp16);
    if (r.validate_reps)
      std::cout << fmt::format("  {} +- {} at M={}{}", pct(r.measured_p95), pct(r.measured_p95_se), r.validate_m,
                               r.within_target(o.target) || !r.m_p95 ? "" : "  ABOVE TARGET");
    if (r.m_p95_low != r.m_p95_high)
      std::cout << fmt::format("  (M for the target within 2 SE: {}..{})", r.m_p95_low, m(r.m_p95_high));
    if (!r.note.empty()) std::cout << "  (" << r.note << ")";
    if (r.out_of_reach)
      std::cout << fmt::format(
          "  (curve ends at M = {}: the target is out of reach; extrapolated, p95 >= {} at M = {} and M >= {:.0f} for "
          "the target)",
          r.out_of_reach->from_m, pct(r.out_of_reach->p95_at_budget), o.budget, r.out_of_reach->m_for_target);
    std::cout << '\n';
  }
  if (!skipped.empty()) std::cout << "not compared:\n";
  for (const auto& [why, who] : skipped)
    std::cout << fmt::format("  {}: {}\n", fmt::format("{}", fmt::join(who, ", ")), why);
  if (!a.cost.m.empty()) {
    std::cout << fmt::format("cost: exact attention {:.3g} GFLOP, {:.3g} MB", a.cost.exact_flops / 1e9,
                             a.cost.exact_bytes / 1e6);
    for (std::size_t k = 0; k < a.cost.m.size(); ++k)
      std::cout << fmt::format("; M={}: {:.3g} GFLOP, {:.3g} MB (cheaper for L > {:.0f})", a.cost.m[k],
                               a.cost.rf_flops[k] / 1e9, a.cost.rf_bytes[k] / 1e6, a.cost.crossover_length[k]);
    std::cout << '\n';
  }
  if (a.cost.exact_seconds >= 0)
    std::cout << fmt::format(
        "measured on this machine: exact {:.3g} s{}, {} (median of 3)\n", a.cost.exact_seconds,
        a.cost.exact_timed_rows < a.Lq
            ? fmt::format(" (timed on {} of the {} query rows, scaled)", a.cost.exact_timed_rows, a.Lq)
            : std::string(),
        a.cost.rf_not_timed.empty()
            ? fmt::format("{} M={} {:.3g} s", a.cost.timed_estimator, a.cost.timed_m, a.cost.rf_seconds)
            : "random features not timed: " + a.cost.rf_not_timed);
  std::set<std::string> methods;
  for (const auto& r : a.rows)
    if (r.status == "ok" && r.method.rfind("simulated", 0) == 0) methods.insert(r.method);
  for (const auto& m : methods) std::cout << m << '\n';
  std::cout << "recommendation: " << a.recommendation << '\n';
}

void write_report(H5Writer& h5, const Advice& a, const nlohmann::json& prov) {
  write_provenance(h5, prov);
  h5.attr("/", "layout",
          "advise/report.json: the whole report (options, per estimator and sampler the predicted error quantiles, "
          "M for the target, numerical range, validation; cost; recommendation); advise/sampled_rows: the query rows; "
          "advise/<estimator>/<sampler>/curve_*: predicted error against M with standard errors and draws, "
          "error_at_1: each sampled row's (or pair's) predicted error at M = 1");
  h5.group("/advise");
  h5.write_text("/advise/report.json", to_json(a).dump(2));
  h5.describe("/advise/report.json", "the whole report as JSON (see the root attribute layout)", "none (JSON text)");
  h5.attr("/advise", "recommendation", a.recommendation);
  h5.attr("/advise", "quantity", a.quantity_label);
  h5.attr("/advise", "target", a.options.target);
  h5.write("/advise/sampled_rows", std::vector<std::int64_t>(a.sampled_rows.begin(), a.sampled_rows.end()));
  h5.describe("/advise/sampled_rows", "indices (0-based) of the query rows the quantiles are over", "row");
  for (const auto& r : a.rows) {
    if (r.status != "ok") continue;
    const std::string g = "/advise/" + r.estimator + "/" + r.sampler;
    h5.group(g);
    h5.write(g + "/curve_m", r.curve_m);
    h5.describe(g + "/curve_m", "number of features M", "m");
    h5.write(g + "/curve_median", r.curve_median);
    h5.describe(g + "/curve_median", "predicted median relative error over the sampled rows (pairs)", "m");
    h5.write(g + "/curve_p95", r.curve_p95);
    h5.describe(g + "/curve_p95", "predicted 95th-percentile relative error over the sampled rows (pairs)", "m");
    h5.write(g + "/curve_median_se", r.curve_median_se);
    h5.describe(g + "/curve_median_se", "standard error of curve_median (0 where exact)", "m");
    h5.write(g + "/curve_p95_se", r.curve_p95_se);
    h5.describe(g + "/curve_p95_se", "standard error of curve_p95 (that of the row at the percentile; 0 where exact)",
                "m");
    h5.write(g + "/curve_draws", r.curve_draws);
    h5.describe(g + "/curve_draws", "nested draws behind each simulated point (0 where exact)", "m");
    h5.write(g + "/error_at_1", r.err1_each);
    h5.describe(g + "/error_at_1",
                "predicted error at M = 1 of each sampled query row (attention; rows in /advise/sampled_rows) "
                "or (query, key) pair (kernel); exact iid rows: the error at M is this / sqrt(M)",
                "row");
    h5.attr(g, "method", r.method);
    h5.attr(g, "m_for_target_p95", static_cast<std::int64_t>(r.m_p95));
    if (r.out_of_reach) {  // advise.hpp OutOfReach: an extrapolation, labelled as one
      h5.attr(g, "out_of_reach_from_m", static_cast<std::int64_t>(r.out_of_reach->from_m));
      h5.attr(g, "out_of_reach_error_at_budget_p95_at_least", r.out_of_reach->p95_at_budget);
      h5.attr(g, "out_of_reach_m_for_target_p95_at_least", r.out_of_reach->m_for_target);
    }
  }
}

// The plot beside the report, drawn into a temporary file and published as the report was (no partial output: the
// report is removed if its plot fails).
void write_plot(const std::string& out, const std::string& png, bool force) {
  const std::string script = std::string(KESTREL_SOURCE_DIR) + "/apps/kestrel/advise_plot.py";
  const std::string tmp = temp_beside(png);
  register_temp_file(tmp);
  const int rc = run_program({"/usr/bin/python3", script, out, tmp});
  unregister_temp_file(tmp);
  if (rc != 0) {
    std::error_code ec;
    std::filesystem::remove(out, ec);
    std::filesystem::remove(tmp, ec);
    throw IoError(fmt::format("plot script failed: /usr/bin/python3 {} {} {} (no report written)", script, out, png));
  }
  publish_output(tmp, png, force);
}

// Refuses an --out that cannot be written, does not end in .h5 or is one of the inputs, before computing; returns the
// path of the plot beside it.
std::string check_out(const Args& a) {
  const std::string& out = a.io->out;
  check_output(out, a.io->force);  // refuses an empty path
  require(std::filesystem::path(out).extension() == ".h5",
          "--out: expected a path ending in .h5 (the plot goes beside it as .png), got '{}'", out);
  const std::string png = std::filesystem::path(out).replace_extension(".png").string();
  check_output(png, a.io->force);
  for (const std::string& in : {a.queries, a.keys, a.values}) {
    const std::string file = in.substr(0, in.find(".h5:") == std::string::npos ? in.size() : in.find(".h5:") + 3);
    std::error_code ec;
    require(in.empty() || !std::filesystem::equivalent(file, out, ec),
            "--out '{}' is one of the input files: write the report elsewhere", out);
  }
  return png;
}

struct Inputs {
  std::shared_ptr<const PointsFile> q, k;
  arma::mat V;
};

Inputs load_inputs(const Args& a) {
  Inputs in{load_points(a.queries), load_points(a.keys), {}};
  if (!a.values.empty()) {
    const auto vf = load_points(a.values);
    in.V = vf->points.t();
    require(in.V.n_rows == in.k->points.n_cols, "--values: {} has {} rows, one per key expected ({} keys in {})",
            a.values, in.V.n_rows, in.k->points.n_cols, a.keys);
  }
  require(in.q->points.n_rows == in.k->points.n_rows, "--queries has d = {} columns but --keys has d = {}",
          in.q->points.n_rows, in.k->points.n_rows);
  return in;
}

// The options with the inputs' paths and sha256, as the report's provenance records them.
nlohmann::json options_with_files(const AdviseOptions& opt, const Args& a, const Inputs& in) {
  nlohmann::json files = {{"queries", {{"spec", in.q->spec}, {"sha256", in.q->sha256}}},
                          {"keys", {{"spec", in.k->spec}, {"sha256", in.k->sha256}}}};
  if (!a.values.empty()) {
    const auto vf = load_points(a.values);
    files["values"] = {{"spec", vf->spec}, {"sha256", vf->sha256}};
  }
  nlohmann::json options = to_json(opt);
  options["files"] = files;
  return options;
}

void run_advise(Args& a, CLI::Option* values, const Global& g) {
  a.values_given = values->count() > 0;
  const AdviseOptions opt = advise_options_from(given_values(*a.table));
  require(!a.values_given || !a.values.empty(), "--values: the path is empty");
  const bool out = a.io->out_option->count() > 0;
  const std::string png = out ? check_out(a) : "";
  const Inputs in = load_inputs(a);
  std::unique_ptr<H5Writer> h5;
  if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);  // fails early on a bad path
  const Advice adv = advise(in.q->points, in.k->points, in.V, opt, [&](const std::string& m) { progress(g, m); });
  const nlohmann::json prov = provenance(g.command_line, options_with_files(opt, a, in));
  if (h5) {
    write_report(*h5, adv, prov);
    h5->commit();
    progress(g, "wrote " + a.io->out);
    write_plot(a.io->out, png, a.io->force);
    progress(g, "wrote " + png);
  }
  if (a.io->json)
    std::cout << nlohmann::json{{"provenance", prov}, {"advice", to_json(adv)}}.dump(2) << '\n';
  else
    print_report(adv);
}

}  // namespace

Action add_advise(CLI::App& app, const Global& g) {
  auto a = std::make_shared<Args>();
  app.add_option("--queries", a->queries, "Queries: CSV, .npy or FILE.h5:/dataset, one token per row")->required();
  app.add_option("--keys", a->keys, "Keys, as --queries (the same d)")->required();
  CLI::Option* values = app.add_option("--values", a->values,
                                       "Values, one row per key (attention output rows; without: the normalisers)");
  a->table = add_table(app, advise_options());
  a->io = add_output_options(app, {.out = "Write the report to this HDF5 file (.h5) and the plot beside it (.png)",
                                   .force = "Replace an existing --out file (and its .png)",
                                   .json = "Print the report as JSON on stdout"});
  return [a, &g, values] { run_advise(*a, values, g); };
}

}  // namespace kestrel::cli
