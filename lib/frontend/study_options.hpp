// The one definition of the study options shared by `kestrel variance`, `kestrel sweep`, their TOML config
// files and the Python functions kestrel.variance_study / kestrel.sweep: names, help, defaults (read from
// VarianceStudyOptions{}), which are lists, and how a value is parsed and checked. The front-ends only
// collect text (a command-line argument, a TOML value, a Python keyword) with where it came from; every
// value then goes through the same strict parser here, so names, defaults and validation cannot drift.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/sweep.hpp"
#include "analysis/variance_study.hpp"
#include "core/enum_names.hpp"
#include "frontend/option_table.hpp"

namespace kestrel {

enum class StudyCommand { Variance, Sweep };
template <>
struct EnumNames<StudyCommand> {
  static constexpr std::string_view what = "command";
  static constexpr std::array<EnumName<StudyCommand>, 2> names{
      {{StudyCommand::Variance, "variance"}, {StudyCommand::Sweep, "sweep"}}};
};
inline std::string to_string(StudyCommand c) { return name_of(c); }

using StudyOption = Option<VarianceStudyOptions>;

const std::vector<StudyOption>& study_options();
std::vector<std::string> study_option_names();
// The option called `name`; InvalidArgument "unknown option 'sigmaa'; did you mean 'sigma'?" otherwise.
const StudyOption& find_study_option(const std::string& name, const std::string& prefix = "");
bool takes_list(const StudyOption& o, StudyCommand c);

using StudyValues = GivenValues;

// Reads section [variance] or [sweep] of a TOML file. Strict: a syntax error names file:line:column; an
// unknown section or key, a key outside a section, a value of the wrong type (a list where one value is
// taken, a string for a number) are errors naming the nearest valid name. The other command's section is
// checked too (its keys, types and each value) but not used; a file without a section for `command` is an error
// naming the sections it has. Keys are exactly the long option names (`halve-real`).
StudyValues read_study_toml(const std::string& path, StudyCommand command);

// Builds the options from given values (later sources already merged in: command line over TOML).
// Everything is validated; the file regime takes d and L from its files unless given.
VarianceStudyOptions variance_options(const StudyValues& v);
SweepOptions sweep_options(const StudyValues& v);  // out and the testing hooks are set by the caller

// The options as provenance records them ({option: value}, option_table.hpp record_options); a sweep's grid axes
// (sigma, dim, points, features) are lists. sweep_options() stores its record in SweepOptions::recorded.
nlohmann::json record_study(const VarianceStudyOptions& o);
nlohmann::json record_sweep(const SweepOptions& s);

// How one `kestrel sweep` process takes part in a sweep, not what it computes (so neither in the recorded options nor
// a TOML key): --shard K/N. The command line and kestrel.sweep(shard=) are generated from this table.
const OptionTable<SweepOptions>& sweep_run_options();
// Sets the given run options on `s`. Without --shard, a task of a Slurm job array takes its shard from the environment
// (`env` reads a variable, nullptr when unset): (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP
// of SLURM_ARRAY_TASK_COUNT; indices that are not evenly spaced (--array=1,3) are an error asking for --shard.
void apply_sweep_run(const GivenValues& v, SweepOptions& s, const std::function<const char*(const char*)>& env);
// --shard K/N (0 <= K < N; `where` names the option in errors), and the shard of a Slurm job array's task from its
// environment (SLURM_ARRAY_TASK_ID - _MIN of _COUNT; count 0 outside an array): kestrel sweep's and kestrel advise's.
SweepShard parse_shard(const std::string& where, const std::string& text);
SweepShard slurm_shard(const std::function<const char*(const char*)>& env);

}  // namespace kestrel
