// Command-line front-end of the study options table (frontend/study_options.hpp) for `variance` and `sweep`:
// registers every option of the table (option_cli.hpp) and --config, and after parsing collects the given values (the
// TOML file first, the command line over it) for the builders.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "frontend/study_options.hpp"
#include "option_cli.hpp"

namespace kestrel::cli {

struct StudyArgs {
  StudyCommand command;
  std::string config;
  std::shared_ptr<TableArgs> table;
};

std::shared_ptr<StudyArgs> add_study_options(CLI::App& app, StudyCommand command);
StudyValues study_values(const StudyArgs& a);

}  // namespace kestrel::cli
