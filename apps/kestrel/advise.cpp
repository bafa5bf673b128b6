// `kestrel advise`: which estimator, how many features and which number format for the user's own queries, keys and
// values (tasks/advise/advise.hpp); a table on stdout (or --json), and with --out an HDF5 report and a PNG beside it.
// Inputs of 3 or 4 axes ([heads, L, d], [layers, heads, L, d]; .npy, or HDF5 with the axes named) are advised per head
// (tasks/advise/heads.hpp).
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "data/points_file.hpp"
#include "frontend/advise_options.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"
#include "kestrel_paths.hpp"
#include "option_cli.hpp"
#include "tasks/advise/advise.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/learned_attention.hpp"

namespace kestrel::cli {

namespace {

struct Args {
  std::string queries, keys, values;
  bool values_given = false;
  std::shared_ptr<TableArgs> table;
  std::shared_ptr<OutputArgs> io;
};

// The plot beside the report by the Python package's kestrel.advice (run as a script from the package the build made:
// it needs matplotlib and h5py, not the compiled module), drawn into a temporary file and published as the report was
// (no partial output: the report is removed if its plot fails).
void write_plot(const std::string& out, const std::string& png, bool force) {
  const std::string script = std::string(KESTREL_PYTHON_DIR) + "/kestrel/advice.py";
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

// The inputs, stacked ones ([heads, L, d], [layers, heads, L, d]) allowed; stacked says whether any is.
struct Files {
  std::shared_ptr<const PointsFile> q, k, v;
  bool stacked() const { return !q->lead.empty() || !k->lead.empty() || (v && !v->lead.empty()); }
};

Files load_files(const Args& a) {
  Files f{load_points(a.queries, true), load_points(a.keys, true), nullptr};
  if (!a.values.empty()) f.v = load_points(a.values, true);
  return f;
}

TokenArray token_array(const PointsFile& f) {
  TokenArray t{{}, f.points};
  arma::uword stacks = 1;
  for (std::size_t s : f.lead) t.shape.push_back(s), stacks *= s;
  t.shape.push_back(f.points.n_cols / stacks);
  t.shape.push_back(f.points.n_rows);
  return t;
}

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

// The inputs' paths and sha256, as the report's provenance records them.
nlohmann::json input_files(const Args& a, const Files& in) {
  nlohmann::json files = {{"queries", {{"spec", in.q->spec}, {"sha256", in.q->sha256}}},
                          {"keys", {{"spec", in.k->spec}, {"sha256", in.k->sha256}}}};
  if (!a.values.empty()) {
    const auto vf = load_points(a.values, true);
    files["values"] = {{"spec", vf->spec}, {"sha256", vf->sha256}};
  }
  return {{"files", files}};
}

// Writes the report (--out: HDF5 and the plot; --json or the table on stdout) of a single-head or a stacked advice.
template <typename A>
void report(const Args& a, const Global& g, std::unique_ptr<H5Writer>& h5, const std::string& png, const A& adv,
            const nlohmann::json& prov) {
  if (h5) {
    write_provenance(*h5, prov, output_kind(adv));
    write_report(*h5, adv, prov.at("options"));
    h5->commit();
    progress(g, "wrote " + a.io->out);
    write_plot(a.io->out, png, a.io->force);
    progress(g, "wrote " + png);
  }
  if (a.io->json) {
    nlohmann::json j = {{"provenance", prov}, {"advice", to_json(adv, prov.at("options"))}};
    stamp_schema(j, output_kind(adv));
    std::cout << j.dump(2) << '\n';
  } else {
    write_table(std::cout, adv);
  }
}

void run_advise(Args& a, CLI::Option* values, const Global& g) {
  a.values_given = values->count() > 0;
  const AdviseOptions opt = advise_options_from(given_values(*a.table));
  require(!a.values_given || !a.values.empty(), "--values: the path is empty");
  const bool out = a.io->out_option->count() > 0;
  const std::string png = out ? check_out(a) : "";
  const Files files = load_files(a);
  if (!opt.learned
           .empty()) {  // --learned: [sequences, L, d] (one head) or [sequences, heads, L, d], shapes checked first
    const TokenArray q = token_array(*files.q), k = token_array(*files.k);
    const std::optional<TokenArray> v = files.v ? std::optional(token_array(*files.v)) : std::nullopt;
    const HeadStack stack = stack_sequences(q, k, v ? &*v : nullptr, {"--queries", "--keys", "--values"});
    std::unique_ptr<H5Writer> h5;
    if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);
    const auto say = [&](const std::string& m) { progress(g, m); };
    const auto prov = provenance(g.command_line, record_advise(opt), input_files(a, files));
    if (q.shape.size() == 3)
      report(a, g, h5, png, advise_sequences(head_sequences(stack, 0), opt, say), prov);
    else
      report(a, g, h5, png, advise_heads(stack, opt, say), prov);
    return;
  }
  if (files.stacked()) {  // heads and layers: every shape checked before the report file is opened
    const TokenArray q = token_array(*files.q), k = token_array(*files.k);
    const std::optional<TokenArray> v = files.v ? std::optional(token_array(*files.v)) : std::nullopt;
    const HeadStack stack = stack_heads(q, k, v ? &*v : nullptr, {"--queries", "--keys", "--values"});
    std::unique_ptr<H5Writer> h5;
    if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);
    const HeadsAdvice adv = advise_heads(stack, opt, [&](const std::string& m) { progress(g, m); });
    report(a, g, h5, png, adv, provenance(g.command_line, record_advise(opt), input_files(a, files)));
    return;
  }
  const Inputs in = load_inputs(a);
  note_layout({a.queries, a.keys});
  std::unique_ptr<H5Writer> h5;
  if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);  // fails early on a bad path
  const Advice adv =
      advise(in.q->points, in.k->points, unit_scaled_values(in.V), opt, [&](const std::string& m) { progress(g, m); });
  report(a, g, h5, png, adv, provenance(g.command_line, record_advise(opt), input_files(a, files)));
}

}  // namespace

Action add_advise(CLI::App& app, const Global& g) {
  auto a = std::make_shared<Args>();
  app.add_option(
         "--queries", a->queries,
         "Queries: CSV, .npy or FILE.h5:/dataset, one token per row; a .npy of [heads, L, d] or [layers, heads, "
         "L, d] (or an HDF5 dataset with those axes named) is advised per head (keys and values may have fewer heads: "
         "grouped-query attention)")
      ->required();
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
