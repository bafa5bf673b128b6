// `kestrel estimators`: the names accepted by --estimators.
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "estimators/registry.hpp"

namespace kestrel::cli {

Action add_estimators(CLI::App&, const Global&) {
  return [] {
    for (const auto& f : estimator_families()) std::cout << fmt::format("{:<10} {}\n", f.name, f.description);
  };
}

}  // namespace kestrel::cli
