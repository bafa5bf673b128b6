// Command-line front-end of the study options table (see study_cli.hpp).
#include "study_cli.hpp"

namespace kestrel::cli {

std::shared_ptr<StudyArgs> add_study_options(CLI::App& app, StudyCommand command) {
  auto a = std::make_shared<StudyArgs>();
  a->command = command;
  const VarianceStudyOptions defaults;
  for (const auto& o : study_options()) {
    const std::string flag = "--" + o.name;
    std::string help = o.help;
    if (takes_list(o, command) && help.find("comma-separated") == std::string::npos) help += " (comma-separated list)";
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
  app.add_option("--config", a->config,
                 "Read options from a TOML file, section [" + to_string(command) +
                     "], keys the long option names (e.g. sigma = [0.5, 1.0], halve-real = true); the command line "
                     "overrides it");
  return a;
}

StudyValues study_values(const StudyArgs& a) {
  StudyValues v;
  if (!a.config.empty()) v = read_study_toml(a.config, a.command);
  for (const auto& [name, opt] : a.option) {
    if (opt->count() == 0) continue;
    const bool is_flag = a.flag.count(name) > 0;
    v[name] = {is_flag ? (a.flag.at(name) ? "true" : "false") : a.text.at(name), "--" + name};
  }
  return v;
}

}  // namespace kestrel::cli
