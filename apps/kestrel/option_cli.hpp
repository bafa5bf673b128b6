// Command-line front-end of the option tables (frontend/option_table.hpp): every option of a table becomes a flag
// or an option of a subcommand, with its help and its default from the table; after parsing the given values are
// collected as text with where they came from ("--seed") for the table's own parsers. The output options
// (--out, --force, --json) are registered here too, one definition for every subcommand that writes files.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "frontend/option_table.hpp"

namespace kestrel::cli {

struct TableArgs {
  std::map<std::string, std::string> text;  // option name -> its argument
  std::map<std::string, bool> flag;         // flags
  std::map<std::string, CLI::Option*> option;
};

template <typename Options>
std::shared_ptr<TableArgs> add_table(CLI::App& app, const OptionTable<Options>& table,
                                     const std::function<bool(const Option<Options>&)>& list = nullptr,
                                     const Options& defaults = Options{}) {
  auto a = std::make_shared<TableArgs>();
  for (const auto& o : table) {
    const std::string flag = "--" + o.name;
    std::string help = o.help;
    if ((list ? list(o) : o.list) && help.find("comma-separated") == std::string::npos)
      help += " (comma-separated list)";
    CLI::Option* opt = nullptr;
    if (o.kind == OptionKind::Flag) {
      opt = app.add_flag(flag, a->flag[o.name], help);
    } else {
      opt = app.add_option(flag, a->text[o.name], help);
      if (const std::string d = o.show(defaults); !d.empty()) opt->default_str(d);
      opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    }
    a->option[o.name] = opt;
  }
  return a;
}

// The options given on the command line, for the table's parsers (merged over `base`, e.g. a TOML file's values).
GivenValues given_values(const TableArgs& a, GivenValues base = {});

// --out, --force and --json: which a subcommand offers and what they mean there (an empty help: not offered).
struct OutputHelp {
  std::string out, force, json;
};
struct OutputArgs {
  std::string out;
  bool force = false, json = false;
  CLI::Option* out_option = nullptr;
};
std::shared_ptr<OutputArgs> add_output_options(CLI::App& app, const OutputHelp& help);

}  // namespace kestrel::cli
