// What every kestrel output says it is: a schema name and a version MAJOR.MINOR, declared once in schema.cpp's table.
// A new field raises the minor version (older readers still read the file); a renamed, removed or re-meant field
// raises the major version, and a reader refuses a major version newer than its own with a one-line message.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kestrel {

// The kinds of output kestrel writes (each a row of schema.cpp's table).
enum class Output {
  Variance,     // kestrel variance --out (HDF5) and --json
  Sweep,        // kestrel sweep (HDF5, its resume record) and --json
  Advise,       // kestrel advise --out / --json on one head, kestrel.advise
  AdviseHeads,  // kestrel advise on stacked heads and layers, kestrel.torch.advise_model
  AdvisePart,   // kestrel advise --shard K/N: one job-array task's layers, merged by kestrel advise merge
  Reproduce,    // kestrel reproduce NAME: NAME.h5
  Claims,       // kestrel reproduce NAME: NAME.claims.json
  Capture,      // kestrel.torch.save_hdf5: a model's captured queries, keys and values
  Plan,         // kestrel.torch.plan: a model's plan per head and its measured loss
};

struct Schema {
  Output output;
  const char* name;  // "kestrel.advise"
  int major, minor;
  const char* what;  // which files and reports carry it
};
const std::vector<Schema>& schemas();
const Schema& schema_of(Output o);
std::string version_text(const Schema& s);  // "1.0"

// Adds "schema" and "schema_version" to a JSON report (an object).
void stamp_schema(nlohmann::json& report, Output o);

// A reader's check of what a file or report says it is (`name` and `version` as written, `source` naming it in the
// message): throws InputFileError when the name is a kestrel schema this version knows and the major version is newer
// than the table's, or the version is not MAJOR.MINOR. A name this version does not know, or no schema at all (an
// output of an older kestrel, or another program's file), is accepted: the reader's own checks of its datasets apply.
void check_schema(const std::string& source, const std::string& name, const std::string& version);

}  // namespace kestrel
