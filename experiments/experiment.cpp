// Running a reproduction: HDF5 with provenance, claims summary, plot (see experiment.hpp).
#include "experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "core/error.hpp"
#include "estimators/registry.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"
#include "kestrel_paths.hpp"
#include "reproduce_options.hpp"

namespace kestrel::experiments {

bool Claim::holds() const {
  if (relation == ">") return measured > claimed;
  if (relation == "<") return measured < claimed;
  return std::abs(measured - claimed) <= tolerance;
}

std::string Claim::verdict() const {
  if (falsification_test) return holds() ? "not contradicted" : "contradicted";
  return holds() ? "holds" : "differs";
}

nlohmann::json to_json(const Claim& c) {
  return {{"source", c.source},   {"statement", c.statement}, {"quantity", c.quantity},   {"relation", c.relation},
          {"claimed", c.claimed}, {"measured", c.measured},   {"tolerance", c.tolerance}, {"settings", c.settings},
          {"note", c.note},       {"holds", c.holds()},       {"verdict", c.verdict()}};
}

// The HDF5 file's `claims` attribute stays as it was (to_json); the claims.json summary adds the SE.
nlohmann::json to_summary_json(const Claim& c) {
  nlohmann::json j = to_json(c);
  j["uncertainty"] = std::isfinite(c.uncertainty) ? nlohmann::json(c.uncertainty) : nlohmann::json(nullptr);
  return j;
}

const Experiment& find_experiment(const std::string& name) {
  // hrf-fig2 covers Fig. 5's lengths (r = 1, 1.25, 1.5) too.
  const std::string n = name == "hrf-fig5" ? "hrf-fig2" : name;
  std::string known;
  for (const auto& e : all_experiments()) {
    if (e.name == n) return e;
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw InvalidArgument(fmt::format("unknown reproduction '{}' (known: {}, all)", name, known));
}

std::string resolve_protocol(const Experiment& e, const std::string& requested) {
  if (requested.empty()) return e.protocols.empty() ? "" : e.protocols.front().name;
  std::string known;
  for (const auto& p : e.protocols) {
    if (p.name == requested) return p.name;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  if (known.empty()) throw InvalidArgument(fmt::format("--protocol '{}': {} has one protocol only", requested, e.name));
  throw InvalidArgument(fmt::format("--protocol '{}' is not a protocol of {} (expected {})", requested, e.name, known));
}

namespace {

void write_text(const std::string& path, const std::string& text, bool replace) {
  const std::string tmp = temp_beside(path);
  register_temp_file(tmp);
  {
    std::ofstream f(tmp);
    if (!(f << text) || !f.flush()) {
      f.close();
      std::filesystem::remove(tmp);
      unregister_temp_file(tmp);
      throw IoError(fmt::format("cannot write '{}'", path));
    }
  }
  try {
    publish_output(tmp, path, replace);
  } catch (...) {
    unregister_temp_file(tmp);
    throw;
  }
  unregister_temp_file(tmp);
}

// A Markdown table cell: no line breaks, and every character that GitHub-flavoured Markdown would read as table,
// emphasis, code or HTML syntax backslash-escaped, so a formula like "|x+y|^2 < 100, a*b" shows as written.
std::string cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\n' || ch == '\r')
      out += ' ';
    else if (std::string_view("\\|<>*_`[]").find(ch) != std::string_view::npos)
      out += std::string("\\") + ch;
    else
      out += ch;
  }
  return out;
}

std::string protocol_description(const Experiment& e, const std::string& protocol) {
  for (const auto& p : e.protocols)
    if (p.name == protocol) return p.description;
  return "";
}

std::string markdown(const Experiment& e, const std::vector<Claim>& claims, const Options& opt) {
  std::string md = fmt::format("# {}: {}\n\n{} run, seed {}, git {}.\n\n", e.name, e.title,
                               opt.quick ? "Quick (reduced)" : "Paper-settings", opt.seed, git_revision());
  if (!opt.protocol.empty())
    md += fmt::format("Protocol `{}`: {}\n\n", opt.protocol, protocol_description(e, opt.protocol));
  md +=
      "| source | claim | quantity | claimed | measured | verdict | settings | note |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : claims) {
    const std::string claimed = c.relation == "~"
                                    ? fmt::format("{} +- {}", format_number(c.claimed), format_number(c.tolerance))
                                    : fmt::format("{} {}", c.relation, format_number(c.claimed));
    const std::string v = c.verdict();
    const std::string measured = std::isfinite(c.uncertainty)
                                     ? fmt::format("{} +- {}", format_number(c.measured), format_number(c.uncertainty))
                                     : format_number(c.measured);
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", cell(c.source), cell(c.statement), cell(c.quantity),
                    cell(claimed), cell(measured), c.holds() ? v : "**" + v + "**", cell(c.settings), cell(c.note));
  }
  return md;
}

}  // namespace

std::string format_number(double x) {
  if (!std::isfinite(x)) return fmt::format("{}", x);
  if (x == std::trunc(x) && std::abs(x) < 1e6) return fmt::format("{:.0f}", x);  // counts and round values whole
  return fmt::format("{:.4g}", x);
}

void check_outputs(const std::string& dir, const std::vector<const Experiment*>& todo, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    check_output(dir, false);  // a new path in a writable, existing parent
    return;
  }
  require(fs::is_directory(dir, ec), "--out '{}' exists and is not a directory", dir);
  for (const auto* e : todo)
    for (const char* ext : {".h5", ".png", ".claims.json", ".claims.md"})
      check_output((fs::path(dir) / (e->name + ext)).string(), force);
  check_claims_files(dir, todo);
}

void check_claims_files(const std::string& dir, const std::vector<const Experiment*>& todo) {
  namespace fs = std::filesystem;
  const std::string suffix = ".claims.json";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string name = file.substr(0, file.size() - suffix.size());
    if (std::any_of(todo.begin(), todo.end(), [&](const Experiment* e) { return e->name == name; })) continue;
    const std::string path = entry.path().string();
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    std::string why;
    if (j.is_discarded())
      why = "not JSON";
    else if (!j.is_object() || !j.contains("claims") || !j["claims"].is_array())
      why = "JSON without a claims list";
    if (why.empty() && j.contains("schema") && j["schema"].is_string() && j.contains("schema_version") &&
        j["schema_version"].is_string())
      check_schema("'" + path + "'", j["schema"], j["schema_version"]);
    if (!why.empty())
      throw InputFileError(fmt::format(
          "'{}' is not a kestrel claims file ({}): the results page (index.html) is made from every NAME.claims.json "
          "in '{}'; remove it, or rerun `kestrel reproduce {} --force` to write it anew",
          path, why, dir, name));
  }
}

void check_index_page(const std::string& dir, bool force) {
  namespace fs = std::filesystem;
  const fs::path page = fs::path(dir) / "index.html";
  std::error_code ec;
  if (force || !fs::exists(page, ec)) return;
  // The mark index_page.py writes into the page's head; pages written before the mark name the script instead.
  std::ifstream f(page);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const bool ours = text.find(R"(<meta name="generator" content="kestrel results page">)") != std::string::npos ||
                    text.find("<code>experiments/index_page.py</code>") != std::string::npos;
  require(ours,
          "output '{}' exists and is not a kestrel results page (reproduce rewrites DIR/index.html): pass --force to "
          "replace it, or give another --out directory",
          page.string());
}

std::vector<Claim> reproduce(const Experiment& e, const Options& requested, const std::string& dir,
                             const std::string& command_line) {
  namespace fs = std::filesystem;
  Options opt = requested;
  opt.protocol = resolve_protocol(e, requested.protocol);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw IoError(fmt::format("cannot create output directory '{}'", dir));
  const std::string stem = (fs::path(dir) / e.name).string();
  std::vector<Claim> claims;
  nlohmann::json options = record_options(reproduce_option_table(), opt);
  options["experiment"] = e.name;  // the command's argument NAME
  const nlohmann::json prov = provenance(command_line, options, regime_inputs(opt.regime_options, true));
  const auto start = std::chrono::steady_clock::now();
  {
    H5Writer h5(stem + ".h5", opt.replace);
    write_provenance(h5, prov, Output::Reproduce);
    h5.attr("/", "families", families_json().dump());  // labels, colours, markers for the plots
    h5.attr("/", "experiment", e.name);
    h5.attr("/", "title", e.title);
    h5.attr("/", "quick", static_cast<std::int64_t>(opt.quick));
    h5.attr("/", "protocol", opt.protocol);
    e.run(opt, h5, claims);
    for (const auto& c : claims)
      if (!std::isfinite(c.measured))
        throw NumericalError(fmt::format("{}: claim '{}' measured a non-finite value", e.name, c.statement));
    nlohmann::json cj = nlohmann::json::array();
    for (const auto& c : claims) cj.push_back(to_json(c));
    // a dataset: advise's claims outgrow an attribute's 64 kB
    h5.write_text("/claims", cj.dump(),
                  {"the reproduction's claims (JSON array): statement, paper's and measured value, verdict", "text"});
    h5.commit();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json summary = {{"experiment", e.name},
                            {"title", e.title},
                            {"provenance", prov},
                            {"seconds", std::round(seconds * 10) / 10},
                            {"protocol_description", protocol_description(e, opt.protocol)},
                            {"claims", nlohmann::json::array()}};
  for (const auto& c : claims) summary["claims"].push_back(to_summary_json(c));
  stamp_schema(summary, Output::Claims);
  write_text(stem + ".claims.json", summary.dump(2) + "\n", opt.replace);
  write_text(stem + ".claims.md", markdown(e, claims, opt), opt.replace);
  const std::string script = std::string(KESTREL_SOURCE_DIR) + "/experiments/" + e.name + "/plot.py";
  if (fs::exists(script)) {
    opt.say("plotting " + stem + ".png");
    const std::string png = temp_beside(stem + ".png");
    register_temp_file(png);
    const int rc = run_program({"/usr/bin/python3", script, stem + ".h5", png});
    unregister_temp_file(png);
    if (rc != 0) {
      std::filesystem::remove(png, ec);
      throw IoError(fmt::format("plot script failed: /usr/bin/python3 {} {}.h5 {}.png", script, stem, stem));
    }
    publish_output(png, stem + ".png", opt.replace);
  }
  return claims;
}

std::string update_index(const std::string& dir) {
  const std::string script = std::string(KESTREL_SOURCE_DIR) + "/experiments/index_page.py";
  std::vector<std::string> argv = {"/usr/bin/python3", script, dir};
  for (const auto& e : all_experiments()) argv.push_back(e.name);  // the page lists them in the registry's order
  if (run_program(argv) != 0) throw IoError(fmt::format("index page failed: /usr/bin/python3 {} {}", script, dir));
  return (std::filesystem::path(dir) / "index.html").string();
}

}  // namespace kestrel::experiments
