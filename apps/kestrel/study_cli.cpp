// Command-line front-end of the study options table (see study_cli.hpp).
#include "study_cli.hpp"

namespace kestrel::cli {

std::shared_ptr<StudyArgs> add_study_options(CLI::App& app, StudyCommand command) {
  auto a = std::make_shared<StudyArgs>();
  a->command = command;
  a->table = add_table(app, study_options(), std::function<bool(const StudyOption&)>([command](const StudyOption& o) {
                         return takes_list(o, command);
                       }));
  app.add_option("--config", a->config,
                 "Read options from a TOML file, section [" + to_string(command) +
                     "], keys the long option names (e.g. sigma = [0.5, 1.0], halve-real = true); the command line "
                     "overrides it");
  return a;
}

StudyValues study_values(const StudyArgs& a) {
  return given_values(*a.table, a.config.empty() ? StudyValues{} : read_study_toml(a.config, a.command));
}

}  // namespace kestrel::cli
