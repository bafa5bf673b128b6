// Command-line front-end of the study options table (frontend/study_options.hpp) for `variance` and `sweep`:
// registers every option of the table and --config, and after parsing collects the given values (the TOML
// file first, the command line over it) for the builders.
#pragma once
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "frontend/study_options.hpp"

namespace kestrel::cli {

struct StudyArgs {
  StudyCommand command;
  std::string config;
  std::map<std::string, std::string> text;  // option name -> its argument
  std::map<std::string, bool> flag;         // flags
  std::map<std::string, CLI::Option*> option;
};

std::shared_ptr<StudyArgs> add_study_options(CLI::App& app, StudyCommand command);
StudyValues study_values(const StudyArgs& a);

}  // namespace kestrel::cli
