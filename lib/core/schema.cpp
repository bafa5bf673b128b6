// The schemas of kestrel's outputs (schema.hpp): one row per kind of output, and the readers' version check.
#include "core/schema.hpp"

#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"

namespace kestrel {

const std::vector<Schema>& schemas() {
  static const std::vector<Schema> table = {
      {Output::Variance, "kestrel.variance", 1, 0, "kestrel variance --out FILE.h5 and --json"},
      {Output::Sweep, "kestrel.sweep", 1, 0, "kestrel sweep --out FILE.h5 (with its resume record) and --json"},
      {Output::Advise, "kestrel.advise", 1, 1, "kestrel advise --out FILE.h5 and --json on one head; kestrel.advise"},
      {Output::AdviseHeads, "kestrel.advise.heads", 1, 2,
       "kestrel advise --out and --json on stacked heads and layers; kestrel.advise on stacked arrays; "
       "kestrel.torch.advise_model"},
      {Output::AdvisePart, "kestrel.advise.part", 1, 0,
       "kestrel advise --shard K/N --out FILE.h5: FILE.h5.parts/layers-K-of-N.h5, the heads of one job-array task's "
       "layers (a stacked report without the summary), merged by kestrel advise merge FILE.h5"},
      {Output::Reproduce, "kestrel.reproduce", 1, 0, "kestrel reproduce NAME --out DIR: NAME.h5"},
      {Output::Claims, "kestrel.claims", 1, 0, "kestrel reproduce NAME --out DIR: NAME.claims.json"},
      {Output::Capture, "kestrel.capture", 1, 0,
       "kestrel.torch.save_hdf5: a model's captured queries, keys and values (kestrel advise --queries "
       "FILE:/inputs/Q)"},
      {Output::Plan, "kestrel.plan", 1, 0,
       "kestrel.torch.plan: per head softmax, random or learned features at M, and the linearized model's measured "
       "loss (the returned dict; out=FILE.h5: /plan/report.json, the choice and M per layer x head, and FILE.png)"},
  };
  return table;
}

const Schema& schema_of(Output o) {
  for (const auto& s : schemas())
    if (s.output == o) return s;
  throw std::logic_error("schema_of: an output without a row in the schema table");
}

std::string version_text(const Schema& s) { return fmt::format("{}.{}", s.major, s.minor); }

void stamp_schema(nlohmann::json& report, Output o) {
  const Schema& s = schema_of(o);
  report["schema"] = s.name;
  report["schema_version"] = version_text(s);
}

void check_schema(const std::string& source, const std::string& name, const std::string& version) {
  for (const auto& s : schemas()) {
    if (name != s.name) continue;
    std::smatch m;
    if (!std::regex_match(version, m, std::regex("([0-9]{1,6})\\.([0-9]{1,6})")))
      throw InputFileError(fmt::format("{}: schema {} has version '{}', not MAJOR.MINOR: not written by kestrel?",
                                       source, name, version));
    if (std::stoi(m[1].str()) > s.major)
      throw InputFileError(fmt::format(
          "{}: schema {} version {} is newer than this kestrel reads ({}.x): read it with the kestrel that wrote it "
          "(its kestrel_version attribute) or a newer one",
          source, name, version, s.major));
    return;
  }
}

}  // namespace kestrel
