// `kestrel variance`: exact single-feature variance statistics per estimator and sigma, optional
// Monte Carlo confirmation, a table on stdout (or JSON with --json) and an HDF5 file with --out.
#include <cmath>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "analysis/variance_study.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "data/regimes.hpp"
#include "estimators/registry.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"
#include "study_cli.hpp"

namespace kestrel::cli {

namespace {

struct Args {
  VarianceStudyOptions opt;
};

void write_file(H5Writer& h5, const std::vector<VarianceResult>& results, const VarianceStudyOptions& opt,
                const nlohmann::json& prov) {
  write_provenance(h5, prov, Output::Variance);
  h5.attr("/", "layout",
          "variance/<estimator>/<column>[row]: one row per sigma (natural logs, softmax-family kernel "
          "named in options.kernel), each column with its description; rows whose status is not 0 (ok) "
          "say why in reason");
  write_h5(h5, "/variance", results, opt);
}

void print_table(const std::vector<ResultRow>& rows, const VarianceStudyOptions& opt) {
  std::cout << fmt::format(
      "regime={} d={} L={} pairs={} kernel={} M={}{} seed={}{}  (natural logs, mean +- std over "
      "all pairs)\n",
      opt.regime, opt.dim, opt.points, opt.pairs, opt.kernel.name(), opt.features,
      opt.halve_real ? " (x2 for real)" : "", opt.seed,
      find_regime(opt.regime).images
          ? " preprocess=" + to_string(opt.regime_options.preprocess) +
                (opt.regime_options.resize != Resize::Area ? " resize=" + to_string(opt.regime_options.resize) : "") +
                (opt.regime_options.pixel_scale != 1 ? " pixel-scale=255" : "")
          : "");
  // The quantity's names for Var and K (study_options: --quantity).
  const bool att = opt.quantity == Quantity::Attention, kc = opt.quantity == Quantity::Kc;
  if (opt.quantity != Quantity::Pair)
    std::cout << fmt::format("quantity={} values={} value-dim={}: mean +- std over {}\n", to_string(opt.quantity),
                             opt.values, opt.value_dim,
                             att ? "rows of K-hat V / K-hat 1 (delta method)" : "entries of K-hat V");
  // The columns shown are those of the result table (analysis/variance_study.hpp) with a CLI format.
  const auto header = [&](std::string h) {
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"{Var}", att ? "MSE" : "Var"},
                                     {"{K}", att  ? "|Y|"
                                             : kc ? "|KV|"
                                                  : "K"}})
      if (const auto at = h.find(key); at != std::string::npos) h.replace(at, key.size(), value);
    return h;
  };
  const auto spread = [](const ResultColumn& c) -> const ResultColumn& {
    for (const auto& s : result_columns())
      if (s.when == c.when && std::string(s.json) == c.spread) return s;
    throw std::logic_error(fmt::format("result column {}: no spread column {}", c.json, c.spread));
  };
  std::cout << fmt::format("{:<10} {:>6}", "estimator", "sigma");
  for (const auto& c : result_columns()) {
    if (c.cli == CliFormat::None || (c.when == ColumnWhen::Mc && !opt.mc_reps)) continue;
    const int width = c.cli == CliFormat::MeanStd ? 22 : c.cli == CliFormat::Number ? 12 : 8;
    std::cout << fmt::format(" {:>{}}", header(c.cli_header), width);
  }
  std::cout << '\n';
  // Fixed point for logs of ordinary size, scientific beyond (a large alpha or sigma gives logs of 1e100).
  const auto num = [](double v, const char* align, int width, int prec) {
    return std::abs(v) < 1e7 ? fmt::format(fmt::runtime(fmt::format("{{:{}{}.{}f}}", align, width, prec)), v)
                             : fmt::format(fmt::runtime(fmt::format("{{:{}{}.{}e}}", align, width, prec - 1)), v);
  };
  for (const auto& r : rows) {
    if (r.status != Status::Ok) {
      std::cout << fmt::format("{:<10} {:>6.3g} {}: {}\n", r.estimator, r.sigma, to_string(r.status), r.reason);
      continue;
    }
    std::cout << fmt::format("{:<10} {:>6.3g}", r.estimator, r.sigma);
    for (const auto& c : result_columns()) {
      if (c.cli == CliFormat::MeanStd)
        std::cout << " " << num(c.real(r), ">", 12, 4) << " +- " << num(spread(c).real(r), "<", 7, 3);
      else if (c.when == ColumnWhen::Mc && !r.mc)
        continue;
      else if (c.cli == CliFormat::Number)
        std::cout << " " << num(c.real(r), ">", 12, 4);
      else if (c.cli == CliFormat::Percent)
        std::cout << fmt::format(" {:>7.1f}%", 100 * c.real(r));
    }
    std::cout << mc_mark(r, opt.sampler);
    if (r.n_exact)
      std::cout << fmt::format("  ({} exact {} left out)", r.n_exact, att ? "rows" : kc ? "entries" : "pairs");
    if (r.n_flagged) std::cout << fmt::format("  ({} rows outside the delta method's range)", r.n_flagged);
    if (r.empirical_reps) std::cout << "  (Monte Carlo estimate: no exact formula)";
    std::cout << '\n';
  }
}

// Issue 37: the exact variance is computed in logs, so it stays finite where the features themselves underflow to 0 or
// overflow in double precision (inputs far from the unit scale). Each estimator is fitted on the first 64 points of
// the first set pair at each sigma, M features are drawn and evaluated, and one line names the rows whose share of
// degenerate feature values exceeds 1%: the exact column is right, but features used in practice would be noise.
std::string degenerate_features(const std::vector<VarianceResult>& results, const VarianceStudyOptions& opt) {
  std::string rows;
  for (const auto& r : results) {
    if (r.status != Status::Ok || r.empirical_reps) continue;
    try {
      const SetPair sp = draw_regime({.name = opt.regime,
                                      .dim = opt.dim,
                                      .points = std::min<arma::uword>(opt.points, 64),
                                      .sigma = r.sigma,
                                      .seed = opt.seed,
                                      .options = opt.regime_options});
      const auto e = make_estimator(r.estimator, sp.X, sp.Y);
      Rng rng(opt.seed, Stream::Features, 0);
      const arma::mat f = e->features(e->draw(r.features, rng, Sampler::Iid), sp.X, Side::Query);
      const double bad = static_cast<double>(arma::accu(f == 0.0) + arma::accu(f != f) +
                                             arma::accu(arma::abs(f) == arma::datum::inf)) /
                         static_cast<double>(std::max<arma::uword>(f.n_elem, 1));
      if (bad > 0.01)
        rows += fmt::format("{}{} sigma={:g} ({:.0f}%)", rows.empty() ? "" : ", ", r.estimator, r.sigma, 100 * bad);
    } catch (const std::exception&) {  // families without features of their own (learned, Python): nothing to check
    }
  }
  if (rows.empty()) return "";
  return fmt::format(
      "[kestrel] warning: numerically degenerate features for {}: that share of the feature values of the first 64 "
      "points underflows to 0 or overflows in double precision. The exact columns hold, but random features used at "
      "this scale would give a degenerate kernel estimate: scale the inputs (smaller sigma) or use another "
      "estimator.\n",
      rows);
}

// One stderr line per study: how many results are undefined, and whether Monte Carlo can be trusted (mc_verdict).
void warn(const Global& g, const std::vector<VarianceResult>& results, const VarianceStudyOptions& opt) {
  std::vector<ResultRow> rows;
  for (const auto& r : results) rows.push_back(result_row(r, opt));
  if (const std::string u = undefined_summary(rows); !u.empty()) progress(g, u);
  std::cerr << mc_verdict(rows, opt.sampler);
}

}  // namespace

Action add_variance(CLI::App& app, const Global& g) {
  auto a = std::make_shared<Args>();
  auto study = add_study_options(app, StudyCommand::Variance);
  auto io = add_output_options(app, {.out = "Write results and provenance to this HDF5 file (new, or replaced with "
                                            "--force)",
                                     .force = "Replace an existing --out file",
                                     .json = "Print the summary as JSON on stdout"});
  return [a, study, io, &g] {
    a->opt = variance_options(study_values(*study));
    if (a->opt.regime == "file") note_layout({a->opt.regime_options.x_file, a->opt.regime_options.y_file});
    std::unique_ptr<H5Writer> h5;
    if (io->out_option->count() > 0) {
      check_output(io->out, io->force);                     // refuses an empty path
      h5 = std::make_unique<H5Writer>(io->out, io->force);  // fails early on a bad path
    }
    const auto results = run_variance_study(a->opt, [&](const std::string& m) { progress(g, m); });
    const nlohmann::json prov = provenance(g.command_line, record_study(a->opt), study_inputs(a->opt));
    warn(g, results, a->opt);
    std::cerr << degenerate_features(results, a->opt);
    if (h5) {
      write_file(*h5, results, a->opt, prov);
      h5->commit();
      progress(g, "wrote " + io->out);
    }
    if (io->json) {
      nlohmann::json j = {{"provenance", prov}, {"results", nlohmann::json::array()}};
      stamp_schema(j, Output::Variance);
      for (const auto& r : results) j["results"].push_back(to_json(r, a->opt));
      std::cout << j.dump(2) << '\n';
    } else {
      std::vector<ResultRow> rows;
      for (const auto& r : results) rows.push_back(result_row(r, a->opt));
      print_table(rows, a->opt);
    }
  };
}

}  // namespace kestrel::cli
