// A reproduction of a paper figure or table (`kestrel reproduce NAME`): a driver that fills one HDF5
// file and states the paper's quantitative claims next to the measured values. Each experiment lives
// in experiments/<name>/ (driver .cpp and plot.py) and is listed once in experiments/registry.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/regimes.hpp"
#include "io/hdf5.hpp"

namespace kestrel::experiments {

struct Options {
  bool quick = false;  // reduced sizes, same code path (tests, CI)
  std::uint64_t seed = 1;
  RegimeOptions regime_options;  // data directory etc.
  std::function<void(const std::string&)> progress;
  void say(const std::string& m) const {
    if (progress) progress(m);
  }
};

// A quantitative claim of the paper: `relation` is ">" (measured must exceed claimed), "<", or "~"
// (|measured - claimed| <= tolerance).
struct Claim {
  std::string source;     // "CRT 5.1"
  std::string statement;  // the paper's words
  std::string quantity;   // what was measured, units included
  std::string relation;
  double claimed = 0, measured = 0, tolerance = 0;
  std::string settings;
  std::string note;  // why it differs, which preprocessing reproduces it, ...
  // A claim that the data can only fail to contradict (e.g. "mean - 3 SE < 0" for Var_ort <= Var_iid):
  // its verdict is "not contradicted" rather than "holds".
  bool falsification_test = false;
  bool holds() const;
  std::string verdict() const;  // "holds", "not contradicted", "differs" or "contradicted"
};
nlohmann::json to_json(const Claim& c);

struct Experiment {
  std::string name;
  std::string title;
  std::function<void(const Options&, H5Writer&, std::vector<Claim>&)> run;
};

const std::vector<Experiment>& all_experiments();
const Experiment& find_experiment(const std::string& name);

// Runs one experiment into dir: NAME.h5 (with provenance), NAME.claims.json, NAME.claims.md, and NAME.png
// from experiments/NAME/plot.py (Debian's python3-matplotlib, python3-h5py). Returns the claims.
std::vector<Claim> reproduce(const Experiment& e, const Options& opt, const std::string& dir,
                             const std::string& command_line);

}  // namespace kestrel::experiments
