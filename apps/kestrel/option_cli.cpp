// Command-line front-end of the option tables (see option_cli.hpp).
#include "option_cli.hpp"

namespace kestrel::cli {

GivenValues given_values(const TableArgs& a, GivenValues base) {
  for (const auto& [name, opt] : a.option) {
    if (opt->count() == 0) continue;
    const bool is_flag = a.flag.count(name) > 0;
    base[name] = {is_flag ? (a.flag.at(name) ? "true" : "false") : a.text.at(name), "--" + name};
  }
  return base;
}

std::shared_ptr<OutputArgs> add_output_options(CLI::App& app, const OutputHelp& help) {
  auto a = std::make_shared<OutputArgs>();
  if (!help.out.empty()) a->out_option = app.add_option("--out", a->out, help.out);
  if (!help.force.empty()) app.add_flag("--force", a->force, help.force);
  if (!help.json.empty()) app.add_flag("--json", a->json, help.json);
  return a;
}

}  // namespace kestrel::cli
