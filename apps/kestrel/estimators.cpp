// `kestrel estimators [--json]`: the names accepted by --estimators (and, as JSON, the whole registry).
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
    for (const auto& f : estimator_families()) std::cout << fmt::format("{:<10} {}\n", f.name, f.description);
  };
}

}  // namespace kestrel::cli
