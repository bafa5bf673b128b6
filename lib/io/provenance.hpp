// How a result was made: command line, options, seed, git revision, library versions, time.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/schema.hpp"

namespace kestrel {

// `options` as recorded from the entry point's option table ({option: value}); `inputs` what identifies the data
// beyond them (files' sha256, the data directory read), when there is any.
nlohmann::json provenance(const std::string& command_line, const nlohmann::json& options,
                          const nlohmann::json& inputs = nlohmann::json::object());
std::string git_revision();

// The root attributes of every kestrel HDF5 file, written by this one function: `schema` and `schema_version` (what
// the file is: core/schema.hpp), `provenance` (the JSON above), `kestrel_version`, `git_revision`, `command`,
// `created_utc`, `options`, `inputs` and `library_versions` (JSON), and `seed` (unsigned 64-bit) when the options have
// one.
class H5Writer;
void write_provenance(H5Writer& h5, const nlohmann::json& provenance, Output kind);
std::string kestrel_version();

}  // namespace kestrel
