// How a result was made: command line, options, seed, git revision, library versions, time.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kestrel {

nlohmann::json provenance(const std::string& command_line, const nlohmann::json& options);
std::string git_revision();
std::string kestrel_version();

}  // namespace kestrel
