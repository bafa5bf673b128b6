// Provenance record (see provenance.hpp).
#include "io/provenance.hpp"

#include <chrono>
#include <ctime>

#include <oneapi/tbb/global_control.h>

#include "io/hdf5.hpp"
#include "kestrel_revision.hpp"

namespace kestrel {

std::string git_revision() { return KESTREL_GIT_REVISION; }
std::string kestrel_version() { return "0.1.0"; }

nlohmann::json provenance(const std::string& command_line, const nlohmann::json& options,
                          const nlohmann::json& inputs) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {
      {"kestrel_version", kestrel_version()},
      {"git_revision", git_revision()},
      {"command", command_line},
      {"options", options},
      {"inputs", inputs},
      {"library_versions", nlohmann::json::parse(library_versions())},
      {"threads", tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)},
      {"created_utc", buf},
  };
}

void write_provenance(H5Writer& h5, const nlohmann::json& prov, Output kind) {
  const Schema& schema = schema_of(kind);
  h5.attr("/", "schema", schema.name);
  h5.attr("/", "schema_version", version_text(schema));
  h5.attr("/", "provenance", prov.dump());
  for (const char* key : {"kestrel_version", "git_revision", "command", "created_utc"})
    h5.attr("/", key, prov[key].get<std::string>());
  h5.attr("/", "options", prov["options"].dump());
  h5.attr("/", "inputs", prov.value("inputs", nlohmann::json::object()).dump());
  h5.attr("/", "library_versions", prov["library_versions"].dump());
  if (prov["options"].contains("seed")) h5.attr("/", "seed", prov["options"]["seed"].get<std::uint64_t>());
}

}  // namespace kestrel
