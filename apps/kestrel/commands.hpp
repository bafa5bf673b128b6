// Subcommands of the kestrel CLI. Each registers its options on the app and returns the action run
// after parsing; errors propagate as kestrel exceptions and become one line on stderr in main.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kestrel::cli {

struct Global {
  std::string command_line;
  int threads = 0;  // 0: all cores
  bool quiet = false;
};

using Action = std::function<void()>;

Action add_variance(CLI::App& app, const Global& g);
Action add_estimators(CLI::App& app, const Global& g);
Action add_datasets(CLI::App& app, const Global& g);
Action add_reproduce(CLI::App& app, const Global& g);
Action add_sweep(CLI::App& app, const Global& g);
Action add_advise(CLI::App& app, const Global& g);

void progress(const Global& g, const std::string& msg);

// "[kestrel] warning: ..." on stderr (even with --quiet) for each points file (given, non-empty) read with fewer points
// than coordinates: it may be the transpose of what was meant (layout_note in data/points_file.hpp).
void note_layout(const std::vector<std::string>& files);

}  // namespace kestrel::cli
