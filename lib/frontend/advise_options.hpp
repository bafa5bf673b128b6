// The one definition of `kestrel advise`'s options, shared by the command line and Python's kestrel.advise: names,
// help, defaults (read from AdviseOptions{}) and the strict parser of each value. The front-ends collect text with
// where it came from ("--target", "target="); every value goes through the same check here.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frontend/study_options.hpp"
#include "tasks/advise/advise.hpp"

namespace kestrel {

using AdviseOption = Option<AdviseOptions>;

const std::vector<AdviseOption>& advise_options();
// Builds the options from given values (option name -> text and source); an unknown name is an error naming the
// nearest valid one, and combinations are checked (a Gaussian kernel only with quantity kernel).
AdviseOptions advise_options_from(const StudyValues& values);
// The options as provenance and the report's "options" block record them ({option: value}, record_options).
nlohmann::json record_advise(const AdviseOptions& o);
// The options a stacked report's summary reads (target, metric, quantity, causal, pays-only, scaling, seed), each set
// from a report's recorded options (record_advise) through its own parser; the others default. `kestrel advise merge`
// reads its parts' with it. `where` names the report in errors.
AdviseOptions summary_options_from_record(const nlohmann::json& record, const std::string& where);

}  // namespace kestrel
