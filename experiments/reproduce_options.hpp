// The options of `kestrel reproduce` and kestrel.reproduce, written once as an option table
// (frontend/option_table.hpp): quick, seed, protocol, rows, force and the image pipeline of the regimes
// (frontend/regime_options.hpp). The command line and the Python function are generated from it and share the checks
// that need the reproductions (a protocol for one reproduction, rows within its query rows).
#pragma once
#include <string>
#include <vector>

#include "experiment.hpp"
#include "frontend/option_table.hpp"

namespace kestrel::experiments {

const OptionTable<Options>& reproduce_option_table();
// "crt-fig1, crt-fig2, ..., or all"
std::string reproduction_names();
// The reproductions `name` ("all" or one) asks for, with the options built from `values` and checked against them
// (before any file is written).
std::vector<const Experiment*> reproduction_request(const std::string& name, const GivenValues& values, Options& o);

}  // namespace kestrel::experiments
