// A reproduction of a paper figure or table (`kestrel reproduce NAME`): a driver that fills one HDF5
// file and states the paper's quantitative claims next to the measured values. Each experiment lives
// in experiments/<name>/ (driver .cpp and plot.py) and is listed once in experiments/registry.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.hpp"
#include "data/regimes.hpp"
#include "io/hdf5.hpp"

namespace kestrel::experiments {

struct Options {
  bool quick = false;  // reduced sizes, same code path (tests, CI)
  std::uint64_t seed = kDefaultSeed;
  bool replace = false;  // --force: replace this reproduction's existing outputs (else refused, also at the last step)
  RegimeOptions regime_options;  // data directory etc.
  // The reading of the paper's protocol (Experiment::protocols); empty = the experiment's default.
  std::string protocol;
  // --rows: query rows sampled with the seed by reproductions that compute exact per-row quantities over all queries
  // (Experiment::query_rows); 0 = every row.
  std::uint64_t rows = 0;
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
  // One standard error of `measured` where the reproduction has one (simulation); NaN (JSON null) for exact values and
  // for quantities that already fold the SE in ("mean - 3 SE", "(MC - exact) / SE").
  double uncertainty = std::numeric_limits<double>::quiet_NaN();
  bool holds() const;
  std::string verdict() const;  // "holds", "not contradicted", "differs" or "contradicted"
};
nlohmann::json to_json(const Claim& c);  // as in the HDF5 file's /claims dataset
// A claim as NAME.claims.json lists it (and kestrel.reproduce returns it): to_json plus `uncertainty` (null if none).
nlohmann::json to_summary_json(const Claim& c);

// A reading of a paper's protocol where the paper leaves it open or kestrel offers an alternative:
// `kestrel reproduce NAME --protocol NAME`.
struct Protocol {
  std::string name, description;
};

struct Experiment {
  std::string name;
  std::string title;
  std::function<void(const Options&, H5Writer&, std::vector<Claim>&)> run;
  std::vector<Protocol> protocols = {};  // the first is the default; empty: one protocol only
  // Reproductions that take --rows: the number of query rows L they sample from (so the CLI checks --rows <= L before
  // anything runs); empty for the others.
  std::function<std::uint64_t(const Options&)> query_rows = nullptr;
};

const std::vector<Experiment>& all_experiments();
const Experiment& find_experiment(const std::string& name);
// The protocol a run of e uses: requested if it is one of e's (an error naming it otherwise), else the default
// ("" for an experiment without alternatives).
std::string resolve_protocol(const Experiment& e, const std::string& requested);

// Runs one experiment into dir: NAME.h5 (with provenance), NAME.claims.json (with `seconds`, the wall time of the
// computation and the HDF5 file), NAME.claims.md, and NAME.png from experiments/NAME/plot.py (Debian's
// python3-matplotlib, python3-h5py). Returns the claims.
// Every file a reproduction writes into dir must be new (or replaced with force); dir itself is an existing directory
// or a new one in a writable parent. Throws InvalidArgument naming the file and the reason; called before computing.
void check_outputs(const std::string& dir, const std::vector<const Experiment*>& todo, bool force);
// The claims files of other reproductions in dir, which the results page reads: each must be JSON with a claims list
// and a schema this version reads (core/schema.hpp); InputFileError naming the file and what to do otherwise.
void check_claims_files(const std::string& dir, const std::vector<const Experiment*>& todo);

std::vector<Claim> reproduce(const Experiment& e, const Options& opt, const std::string& dir,
                             const std::string& command_line);

// dir/index.html may be replaced: it is absent, kestrel's results page (marked by index_page.py's generator tag), or
// force is set. Throws InvalidArgument naming the file otherwise (a page of the user's is never replaced silently).
void check_index_page(const std::string& dir, bool force);

// Rewrites dir/index.html (experiments/index_page.py, Python's standard library only) from every NAME.claims.json in
// dir: one page with the counts of claims by verdict and every reproduction's figure, claims and options. Sections of
// reproductions not run this time are kept (their files are still in dir). Returns the page's path.
std::string update_index(const std::string& dir);

// A number for a claims table or a terminal: 4 significant digits (1.159e+21, 0.0003142, 12.35).
std::string format_number(double x);

}  // namespace kestrel::experiments
