// `kestrel estimators [--json]`: the names accepted by --estimators (and, as JSON, the whole registry).
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "estimators/registry.hpp"

namespace kestrel::cli {

Action add_estimators(CLI::App& app, const Global&) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print the registry as JSON: name, description, label, color, marker, kind");
  return [json] {
    if (*json) {
      std::cout << families_json().dump(2) << '\n';
      return;
    }
    std::size_t width = 0;
    for (const auto& f : estimator_families()) width = std::max(width, f.name.size());
    for (const auto& f : estimator_families()) std::cout << fmt::format("{:<{}}  {}\n", f.name, width, f.description);
  };
}

}  // namespace kestrel::cli
