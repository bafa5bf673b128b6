// `kestrel advise`: which estimator, how many features and which number format for the user's own queries, keys and
// values (tasks/advise/advise.hpp); a table on stdout (or --json), and with --out an HDF5 report and a PNG beside it.
// Inputs of 3 or 4 axes ([heads, L, d], [layers, heads, L, d]; .npy, or HDF5 with the axes named) are advised per head
// (tasks/advise/heads.hpp).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <regex>

#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "core/schema.hpp"
#include "data/points_file.hpp"
#include "frontend/advise_options.hpp"
#include "frontend/study_options.hpp"
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
  std::string queries, keys, values, shard;
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

// The report on stdout: JSON with its provenance and schema (--json), or the table.
void print_json(const nlohmann::json& prov, nlohmann::json advice, Output kind) {
  nlohmann::json j = {{"provenance", prov}, {"advice", std::move(advice)}};
  stamp_schema(j, kind);
  std::cout << j.dump(2) << '\n';
}
template <typename A>
void print_report(const Args& a, const A& adv, const nlohmann::json& prov) {
  if (a.io->json)
    print_json(prov, to_json(adv, prov.at("options")), output_kind(adv));
  else
    write_table(std::cout, adv);
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
  print_report(a, adv, prov);
}

// --shard K/N (or a Slurm job array task's shard) for a stacked input: count 1 for the whole stack. A part needs --out
// (it goes to OUT.h5.parts/) and a layer of its own.
SweepShard requested_shard(const Args& a, bool out) {
  const SweepShard s =
      a.shard.empty() ? slurm_shard([](const char* v) { return std::getenv(v); }) : parse_shard("--shard", a.shard);
  return s.count <= 1 || (a.shard.empty() && !out) ? SweepShard{} : s;  // an array task without --out: the whole stack
}

LayerShard layer_shard(const Args& a, const HeadStack& stack, bool out) {
  const SweepShard s = requested_shard(a, out);
  if (s.count <= 1) return {};
  const std::string what = a.shard.empty() ? fmt::format("this Slurm array task's shard {}/{}", s.index, s.count)
                                           : fmt::format("--shard {}", a.shard);
  require(out, "{}: a part goes beside the report (OUT.h5.parts/): give --out OUT.h5", what);
  require(s.index < stack.layers,
          "{}: the input has {} layer(s), so shard {} has none (shards take layers l with l mod N = K): use N <= {}",
          what, stack.layers, s.index, stack.layers);
  return {s.index, s.count};
}

// A part that exists: finished when it was made with these options and inputs (a resubmitted array's task has nothing
// to do: said, and its report printed as a run prints it), refused when not (a finished result is not replaced without
// --force).
bool finished_part(const Args& a, const Global& g, const std::string& part, const AdviseOptions& opt,
                   const nlohmann::json& inputs) {
  const H5Reader r(part);
  const nlohmann::json prov = nlohmann::json::parse(r.attr_string("/", "provenance"));
  require(
      prov.value("options", nlohmann::json()) == record_advise(opt) && prov.value("inputs", nlohmann::json()) == inputs,
      "{} exists from a run with other options or inputs: pass --force to replace it, or give another --out", part);
  progress(g, fmt::format("{} is finished (the same options and inputs): nothing to compute", part));
  if (a.io->json) print_json(prov, nlohmann::json::parse(r.read_text("/advise/report.json")), Output::AdvisePart);
  return true;
}

// One part of a split run: the heads of the shard's layers into OUT.h5.parts/layers-K-of-N.h5 (no plot; `kestrel
// advise merge OUT.h5` writes the report and its plot), and the part on stdout.
void run_part(const Args& a, const Global& g, const HeadStack& stack, const AdviseOptions& opt, const LayerShard& shard,
              const nlohmann::json& inputs) {
  const std::string dir = a.io->out + ".parts";
  const std::string part = fmt::format("{}/layers-{}-of-{}.h5", dir, shard.index, shard.count);
  if (std::filesystem::exists(part) && !a.io->force && finished_part(a, g, part, opt, inputs)) return;
  std::filesystem::create_directories(dir);
  check_output(part, a.io->force);
  auto h5 = std::make_unique<H5Writer>(part, a.io->force);
  const std::string who = fmt::format("part {}/{}: ", shard.index, shard.count);
  const HeadsAdvice adv = advise_heads(
      stack, opt, [&](const std::string& m) { progress(g, who + m); }, shard);
  // The shard is how this run takes part, not what it computes: the merged report records the run's command.
  const std::string command = std::regex_replace(g.command_line, std::regex(" --shard[= ][^ ]*"), "");
  nlohmann::json prov = provenance(command, record_advise(opt), inputs);
  prov["shard"] = fmt::format("{}/{}", shard.index, shard.count);
  write_provenance(*h5, prov, output_kind(adv));
  write_report(*h5, adv, prov.at("options"));
  h5->commit();
  progress(g, fmt::format("wrote {} (layers {}); when every part is there, `kestrel advise merge {}` writes the report",
                          part, fmt::join(adv.shard_layers, ", "), a.io->out));
  print_report(a, adv, prov);
}

void run_advise(Args& a, CLI::Option* values, const Global& g) {
  require(!a.queries.empty() && !a.keys.empty(),
          "{} is required (see --help; `kestrel advise merge OUT.h5` takes none)",
          a.queries.empty() ? "--queries" : "--keys");
  a.values_given = values->count() > 0;
  const AdviseOptions opt = advise_options_from(given_values(*a.table));
  require(!a.values_given || !a.values.empty(), "--values: the path is empty");
  const bool out = a.io->out_option->count() > 0;
  const Files files = load_files(a);
  // A part of a split run writes OUT.h5.parts/layers-K-of-N.h5 (checked there), not OUT.h5.
  const bool part = out && files.stacked() && opt.learned.empty() && requested_shard(a, out).count > 1;
  require(!part || std::filesystem::path(a.io->out).extension() == ".h5",
          "--out: expected the report's path ending in .h5 (its parts go to OUT.h5.parts/), got '{}'", a.io->out);
  const std::string png = out && !part ? check_out(a) : "";
  require(opt.learned.empty() || a.shard.empty(),
          "--shard {} with --learned: a split run takes random-feature rows only so far; run --learned in one process",
          a.shard);
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
    const LayerShard shard = layer_shard(a, stack, out);
    if (shard.count > 1) return run_part(a, g, stack, opt, shard, input_files(a, files));
    std::unique_ptr<H5Writer> h5;
    if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);
    const HeadsAdvice adv = advise_heads(stack, opt, [&](const std::string& m) { progress(g, m); });
    report(a, g, h5, png, adv, provenance(g.command_line, record_advise(opt), input_files(a, files)));
    return;
  }
  require(a.shard.empty(),
          "--shard {}: it splits the layers of a stacked input ([layers, heads, L, d]); these "
          "inputs are one head",
          a.shard);
  const Inputs in = load_inputs(a);
  note_layout({a.queries, a.keys});
  std::unique_ptr<H5Writer> h5;
  if (out) h5 = std::make_unique<H5Writer>(a.io->out, a.io->force);  // fails early on a bad path
  const Advice adv =
      advise(in.q->points, in.k->points, unit_scaled_values(in.V), opt, [&](const std::string& m) { progress(g, m); });
  report(a, g, h5, png, adv, provenance(g.command_line, record_advise(opt), input_files(a, files)));
}

// `kestrel advise merge OUT.h5`: the report of the whole stack from the parts in OUT.h5.parts/ (merge_heads), written
// as one process writes it: report.json and the summary, each head's groups copied from its part, and the plot.
void run_merge(const std::string& out, const OutputArgs& io, const Global& g) {
  const std::filesystem::path dir = out + ".parts";
  require(std::filesystem::path(out).extension() == ".h5", "OUT: expected the report's path ending in .h5, got '{}'",
          out);
  require(std::filesystem::is_directory(dir),
          "no parts to merge: {} is not a directory (run `kestrel advise --shard K/N --out {}` for every K first)",
          dir.string(), out);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> parts, provs;
  for (const auto& f : files) {
    const H5Reader r(f);
    const std::string schema = r.has_attr("/", "schema") ? r.attr_string("/", "schema") : "";
    require(schema == schema_of(Output::AdvisePart).name, "{}: not a part of a split `kestrel advise` (schema '{}')", f,
            schema);
    check_schema(f, schema, r.attr_string("/", "schema_version"));
    parts.push_back(nlohmann::json::parse(r.read_text("/advise/report.json")));
    provs.push_back(nlohmann::json::parse(r.attr_string("/", "provenance")));
  }
  require(!parts.empty(), "no parts to merge in {} (run `kestrel advise --shard K/N --out {}` for every K first)",
          dir.string(), out);
  const std::string png = std::filesystem::path(out).replace_extension(".png").string();
  check_output(out, io.force);
  check_output(png, io.force);
  const AdviseOptions opt = summary_options_from_record(parts[0].at("options"), files[0]);
  const MergedHeads m = merge_heads(parts, files, opt);
  nlohmann::json prov = provs[0];
  prov.erase("shard");
  prov["created_utc"] = provenance("", nlohmann::json::object())["created_utc"];
  prov["shards"] = nlohmann::json::array();  // the parts merged, as the merged sweep records its shards
  for (const auto& p : provs) prov["shards"].push_back(p.value("shard", ""));
  H5Writer h5(out, io.force);
  write_provenance(h5, prov, Output::AdviseHeads);
  write_summary_report(h5, m.advice, m.report);
  for (const auto& h : m.report.at("heads")) {  // each head's groups from the first part that has its layer
    const arma::uword layer = h.at("layer");
    std::size_t p = 0;
    while (!std::count(parts[p]["shard"]["layers"].begin(), parts[p]["shard"]["layers"].end(), layer)) ++p;
    h5.copy(files[p], fmt::format("/advise/layer{}/head{}", layer, h.at("head").get<arma::uword>()));
  }
  h5.commit();
  progress(g, fmt::format("wrote {} ({} heads from {} parts)", out, m.advice.heads.size(), files.size()));
  write_plot(out, png, io.force);
  progress(g, "wrote " + png);
  if (io.json) {
    print_json(prov, m.report, Output::AdviseHeads);
  } else {
    write_summary_table(std::cout, m.advice);
  }
}

// `kestrel advise merge OUT.h5`.
Action add_merge(CLI::App& advise, const Global& g) {
  CLI::App* merge = advise.add_subcommand(
      "merge",
      "Write OUT.h5 (and its plot) from the parts that `kestrel advise --shard K/N --out OUT.h5` (or Slurm array "
      "tasks) left in OUT.h5.parts/; exit 3 naming the layers no part has");
  auto out = std::make_shared<std::string>();
  merge->add_option("OUT", *out, "The report's --out file (OUT.h5)")->required();
  auto io = add_output_options(
      *merge,
      {.out = "", .force = "Replace an existing OUT.h5 and its plot", .json = "Print the report as JSON on stdout"});
  return [&advise, out, io, &g] {
    for (const CLI::Option* o : advise.get_options())
      if (o->count() > 0 && o != advise.get_help_ptr())
        throw InvalidArgument(fmt::format(
            "{} is an option of the advise run, not of `kestrel advise merge` (which takes OUT.h5, --force and "
            "--json): the parts recorded their options",
            o->get_name()));
    run_merge(*out, *io, g);
  };
}

}  // namespace

Action add_advise(CLI::App& app, const Global& g) {
  auto a = std::make_shared<Args>();
  app.add_option(
      "--queries", a->queries,
      "Queries: CSV, .npy or FILE.h5:/dataset, one token per row; a .npy of [heads, L, d] or [layers, heads, "
      "L, d] (or an HDF5 dataset with those axes named) is advised per head (keys and values may have fewer heads: "
      "grouped-query attention); required");
  app.add_option("--keys", a->keys, "Keys, as --queries (the same d)");
  app.add_option("--shard", a->shard,
                 "K/N: advise only layers l with l mod N = K of a stacked input [layers, heads, L, d], into "
                 "OUT.h5.parts/ beside --out, for `kestrel advise merge OUT.h5`; in a Slurm job array with --out the "
                 "default is the array task's shard (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of "
                 "SLURM_ARRAY_TASK_COUNT), else the whole stack");
  CLI::Option* values = app.add_option("--values", a->values,
                                       "Values, one row per key (attention output rows; without: the normalisers)");
  a->table = add_table(app, advise_options());
  a->io = add_output_options(app, {.out = "Write the report to this HDF5 file (.h5) and the plot beside it (.png)",
                                   .force = "Replace an existing --out file (and its .png)",
                                   .json = "Print the report as JSON on stdout"});
  Action merge = add_merge(app, g);
  return [a, &g, values, merge, &app] {
    if (app.got_subcommand("merge")) return merge();
    run_advise(*a, values, g);
  };
}

}  // namespace kestrel::cli
