// Resumable parameter sweeps (see sweep.hpp).
#include "analysis/sweep.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"

namespace kestrel {

namespace fs = std::filesystem;

namespace {
void check_extension(const SweepOptions& opt);
}  // namespace

std::string to_string(const SweepShard& s) { return fmt::format("{}/{}", s.index, s.count); }

void validate(const SweepOptions& opt) {
  require(!opt.out.empty(), "a sweep needs --out FILE.h5 (missing, or an empty path)");
  if (opt.shard.count > 0) {
    require(opt.shard.index < opt.shard.count, "--shard: expected K/N with 0 <= K < N, got '{}'", to_string(opt.shard));
    require(!opt.force,
            "--force cannot be combined with --shard {}: a shard writes only '{}.parts/'; run `kestrel sweep merge "
            "--force {}` to replace '{}', or remove '{}.parts' to discard finished grid points",
            to_string(opt.shard), opt.out, opt.out, opt.out, opt.out);
    check_output(opt.out, true);  // OUT itself is written by `kestrel sweep merge`, which checks it again
  } else {
    if (!opt.force) check_extension(opt);
    check_output(opt.out, opt.force || sweep_extends(opt));  // extending a finished sweep needs no --force
  }
  require(!opt.sigmas.empty() && !opt.dims.empty() && !opt.points.empty() && !opt.features.empty(),
          "every sweep axis needs at least one value");
  VarianceStudyOptions probe = opt.base;
  for (double s : opt.sigmas) {
    for (auto d : opt.dims)
      for (auto L : opt.points)
        for (auto M : opt.features) {
          probe.sigmas = {s}, probe.dim = d, probe.points = L, probe.features = M;
          validate(probe);
        }
  }
}

namespace {

// The grid's axes by the names of their options (lists in SweepOptions::recorded).
constexpr std::array<const char*, 4> kAxes = {"sigma", "dim", "points", "features"};

// What a sweep's parts and its resume record keep of its options: the recorded options and, under "inputs", what
// identifies its points beyond them (study_inputs: the files' contents, the --halve-real rule).
nlohmann::json sweep_record(const SweepOptions& opt) {
  require(opt.recorded.is_object() && opt.recorded.contains("sigma"),
          "internal: the sweep's options are not recorded (build SweepOptions with sweep_options())");
  nlohmann::json j = opt.recorded;
  j["inputs"] = study_inputs(opt.base);
  return j;
}

// The temporary name is unique to the process: shards of different N may publish the same grid point at once.
void write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = fmt::format("{}.tmp{}", p.string(), static_cast<long>(::getpid()));
  register_temp_file(tmp);
  {
    std::ofstream f(tmp);
    if (!(f << text) || !f.flush()) {
      unregister_temp_file(tmp);
      throw IoError(fmt::format("cannot write '{}'", tmp.string()));
    }
  }
  fs::rename(tmp, p);
  unregister_temp_file(tmp);
}

std::string duration(double secs) {
  const long s = std::lround(secs);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Why a JSON file of OUT.parts/ cannot be read back ("" when it can, into j): not a file, empty, or not JSON
// (truncated, binary or another program's; its bytes are not echoed), or JSON that `fits` refuses (`what` it is not).
std::string unreadable(const fs::path& p, nlohmann::json& j, const std::function<bool(const nlohmann::json&)>& fits,
                       const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return "not a regular file";
  const std::string text = read_text(p);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "empty";
  j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return fmt::format("not valid JSON ({} bytes: truncated, binary or not written by kestrel)", text.size());
  try {
    if (fits(j)) return "";
  } catch (const std::exception&) {
  }
  return fmt::format("JSON that is not {}", what);
}

// A grid point's rows as its part file holds them; a broken file is an InputFileError naming it and `redo` (how to
// compute it again).
nlohmann::json read_part(const fs::path& p, const std::string& redo) {
  nlohmann::json j;
  const auto rows = [](const nlohmann::json& x) {
    for (const auto& r : x) row_from_json(r);
    return x.is_array() && !x.empty();
  };
  const std::string why = unreadable(p, j, rows, "a grid point's results");
  if (!why.empty())
    throw InputFileError(fmt::format("grid point file '{}' is {}: delete it and {}", p.string(), why, redo));
  return j;
}

// A sweep's recorded options (OUT.parts/options.json: an object with the grid axes); a broken file is an
// InputFileError naming it with what to do (`rerun`: how to record them again).
nlohmann::json read_options(const fs::path& p, const std::string& rerun) {
  nlohmann::json j;
  const auto options = [](const nlohmann::json& x) {
    return x.is_object() && x.contains("sigma") && x.contains("dim") && x.contains("points") &&
           x.contains("features") && x.contains("estimators");
  };
  const std::string why = unreadable(p, j, options, "a sweep's options");
  if (!why.empty())
    throw InputFileError(fmt::format(
        "'{}' is {}: it records which sweep the finished grid points beside it belong to; if they are this sweep's, "
        "delete it and {} (they are kept), otherwise remove '{}'",
        p.string(), why, rerun, p.parent_path().string()));
  return j;
}

struct GridPoint {
  double sigma;
  arma::uword dim, points, features;
  std::string label() const { return fmt::format("d={} L={} M={} sigma={}", dim, points, features, sigma); }
  std::string file() const { return fmt::format("d{}_L{}_M{}_s{:.17g}.json", dim, points, features, sigma); }
};

// Grid points in the order of the HDF5 rows; point i belongs to rank i % size.
std::vector<GridPoint> grid(const SweepOptions& opt) {
  std::vector<GridPoint> g;
  for (auto d : opt.dims)
    for (auto L : opt.points)
      for (auto M : opt.features)
        for (double s : opt.sigmas) g.push_back({s, d, L, M});
  return g;
}

// The options that must agree for a finished sweep's rows to be reused: all but the grid axes.
nlohmann::json resume_key(const nlohmann::json& options) {
  nlohmann::json k = options;
  for (const char* axis : kAxes) k.erase(axis);
  return k;
}

// Each option that differs between this run's options and those recorded with finished points, as
// "--seed 2 here, 1 there; --kernel 'gaussian' here, 'softmax' there" (keys of the record are option names; those
// under "inputs" are named as they are: "x_file_sha256 'ab12...' here, 'cd34...' there").
std::string option_differences(const nlohmann::json& here, const nlohmann::json& there) {
  if (!there.is_object() || !there.contains("inputs")) return "the options recorded by another kestrel version";
  std::vector<std::string> out;
  std::function<void(const nlohmann::json&, const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix) {
        std::set<std::string> keys;
        for (const auto& [k, v] : a.items()) keys.insert(k);
        for (const auto& [k, v] : b.items()) keys.insert(k);
        for (const auto& k : keys) {
          const nlohmann::json x = a.value(k, nlohmann::json()), y = b.value(k, nlohmann::json());
          if (x == y) continue;
          if (x.is_object() && y.is_object()) {
            walk(x, y, k + ".");
            continue;
          }
          const auto show = [](const nlohmann::json& j) {
            if (j.is_null()) return std::string("(none)");
            if (j.is_string()) return "'" + j.get<std::string>() + "'";
            if (!j.is_array()) return j.dump();
            std::string list;
            for (const auto& item : j)
              list += (list.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
            return "'" + list + "'";
          };
          out.push_back(fmt::format("{}{} {} here, {} there", prefix.empty() ? "--" : prefix, k, show(x), show(y)));
        }
      };
  walk(here, there, "");
  if (out.empty()) return "the options recorded by another kestrel version";
  return fmt::format("{}", fmt::join(out, "; "));
}

// The /sweep/resume record of a finished sweep in `out` ({"options", "points": {part file: rows}}), or null
// when `out` is not a finished sweep's file. A file of a newer major version of the sweep's schema (core/schema.hpp)
// is refused (InputFileError), unless `force` replaces it.
nlohmann::json finished_record(const std::string& out, bool force) {
  std::error_code ec;
  if (!fs::is_regular_file(out, ec)) return nullptr;
  try {
    const H5Reader h5(out);
    if (!h5.exists("/sweep/resume")) return nullptr;
    return nlohmann::json::parse(h5.read_text("/sweep/resume"));
  } catch (const InputFileError&) {
    if (force) return nullptr;
    throw;
  } catch (const std::exception&) {
    return nullptr;  // not HDF5 or not ours: the caller's overwrite rules apply
  }
}

// "a; b; c" of the first 20 items, then "; and N more".
std::string first_names(const std::vector<std::string>& items) {
  constexpr std::size_t kShown = 20;
  std::string names;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) names += (i ? "; " : "") + items[i];
  if (items.size() > kShown) names += fmt::format("; and {} more", items.size() - kShown);
  return names;
}

// The finished grid points of a resume record that the grid of `axes` leaves out (their labels), and the grid options
// that keep every one of them ("--sigma 0.5,1", the axes that grow only).
struct LeftOut {
  std::vector<std::string> points;
  std::string grid;
};

template <typename T>
void add_value(std::vector<T>& axis, T v) {
  if (std::find(axis.begin(), axis.end(), v) == axis.end()) axis.push_back(v);
}

LeftOut left_out(const nlohmann::json& rec, const SweepOptions& axes) {
  std::set<std::string> mine;
  for (const auto& p : grid(axes)) mine.insert(p.file());
  LeftOut r;
  SweepOptions all = axes;
  const nlohmann::json finished = rec.value("points", nlohmann::json::object());  // kept alive for items()
  for (const auto& [f, rows] : finished.items()) {
    if (mine.count(f)) continue;
    unsigned long long d = 0, L = 0, M = 0;
    double s = 0;
    if (std::sscanf(f.c_str(), "d%llu_L%llu_M%llu_s%lg.json", &d, &L, &M, &s) != 4) {
      r.points.push_back(f);
      continue;
    }
    r.points.push_back(GridPoint{s, d, L, M}.label());
    add_value(all.sigmas, s), add_value<arma::uword>(all.dims, d), add_value<arma::uword>(all.points, L);
    add_value<arma::uword>(all.features, M);
  }
  const auto axis = [&](const char* name, const auto& here, const auto& wider) {
    if (wider.size() != here.size())
      r.grid += fmt::format("{}--{} {}", r.grid.empty() ? "" : " ", name, fmt::join(wider, ","));
  };
  axis("sigma", axes.sigmas, all.sigmas), axis("dim", axes.dims, all.dims), axis("points", axes.points, all.points);
  axis("features", axes.features, all.features);
  return r;
}

// A finished sweep in `out` whose grid points this grid (`axes`) leaves out is not replaced without --force (only
// --force discards finished points): the error names them and says how to keep them, the merge (`merging`) by
// moving the file away (its shards' grid is recorded), a run by the grid that holds both.
void check_keeps_finished(const nlohmann::json& rec, const SweepOptions& axes, const std::string& out, bool merging) {
  const LeftOut lost = left_out(rec, axes);
  if (lost.points.empty()) return;
  const std::string keep =
      merging ? fmt::format("nothing was written; move '{}' away to keep it and merge again", out)
              : fmt::format("rerun with {} to extend it", lost.grid.empty() ? "a grid that holds them" : lost.grid);
  throw InvalidArgument(
      fmt::format("output '{}' holds a finished sweep with {} grid points that this grid leaves out ({}), so writing "
                  "it would drop them: {}, or pass --force to replace it (discarding them)",
                  out, lost.points.size(), first_names(lost.points), keep));
}

// A finished sweep in opt.out with other options (but the grid axes) cannot be extended by this run: the error names
// each option that differs with both values and says what --force discards. Nor can a grid that leaves out some of
// its points replace it.
void check_extension(const SweepOptions& opt) {
  const nlohmann::json rec = finished_record(opt.out, opt.force);
  if (rec.is_null()) return;
  const nlohmann::json here = resume_key(sweep_record(opt)), there = rec.value("options", nlohmann::json());
  if (here == there) return check_keeps_finished(rec, opt, opt.out, false);
  throw InvalidArgument(fmt::format(
      "output '{}' exists and holds a finished sweep with other options, so this run cannot extend it: {}; rerun "
      "with its options to extend it, or pass --force to replace it (discarding its {} finished grid points)",
      opt.out, option_differences(here, there), rec.value("points", nlohmann::json::object()).size()));
}

// Copies the rows of grid points that a finished sweep in `out` already holds into the parts directory,
// so that extending a sweep by a grid value computes only the new points. Returns how many were reused.
std::size_t reuse_finished(const std::string& out, bool force, const fs::path& parts, const nlohmann::json& options,
                           const std::vector<std::string>& files) {
  const nlohmann::json rec = finished_record(out, force);
  if (rec.is_null() || rec.value("options", nlohmann::json()) != resume_key(options)) return 0;
  std::size_t n = 0;
  for (const auto& f : files)
    if (rec["points"].contains(f) && !fs::exists(parts / f)) {
      write_atomic(parts / f, rec["points"][f].dump());
      ++n;
    }
  return n;
}

// A shard's files in OUT.parts/: "shard-K-of-N" + ".json" (its provenance) or ".lock".
std::string shard_file(const SweepShard& s, const char* ext) {
  return fmt::format("shard-{}-of-{}{}", s.index, s.count, ext);
}

// A shard's provenance record (OUT.parts/shard-K-of-N.json, an object with the sweep's options) for the merge of
// `out`; a broken one is an InputFileError naming it and the shard to rerun.
nlohmann::json read_shard_record(const fs::path& p, const SweepShard& s, const std::string& out) {
  nlohmann::json j;
  const auto record = [](const nlohmann::json& x) { return x.is_object() && x.contains("options"); };
  const std::string why = unreadable(p, j, record, "a shard's record");
  if (!why.empty())
    throw InputFileError(fmt::format(
        "shard record '{}' is {}: delete it and rerun shard {} (its finished grid points are kept), then `kestrel "
        "sweep merge {}`",
        p.string(), why, to_string(s), out));
  return j;
}

// A grid point's results in OUT.parts/ (not options.json, a shard's record or a temporary file).
bool is_point_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return p.extension() == ".json" && name != "options.json" && name.rfind("shard-", 0) != 0;
}

// The options recorded in the parts directory of this run (opt): null when they cannot be read and --force discards
// them.
nlohmann::json parts_options(const fs::path& opt_file, const SweepOptions& opt) {
  const bool sharded = opt.shard.count > 0;
  try {
    return read_options(opt_file, sharded ? "rerun this shard" : "rerun the same command");
  } catch (const InputFileError&) {
    if (!opt.force || sharded) throw;
    return nullptr;
  }
}

// Rank 0 creates OUT.parts/, locks it (a shard locks its own shard-K-of-N.lock: shards run at once), checks that its
// parts belong to this sweep and seeds it with the grid points a finished sweep in OUT already holds; the other ranks
// then check that they see it (a sweep over several machines needs OUT on a shared filesystem).
std::unique_ptr<OutputLock> prepare_parts(const fs::path& parts, const SweepOptions& opt, const nlohmann::json& options,
                                          SweepGroup& group, const std::function<void()>& seed_parts) {
  const std::string& out = opt.out;
  const bool sharded = opt.shard.count > 0;
  const std::string lock_name = sharded ? shard_file(opt.shard, ".lock") : "lock";
  const fs::path opt_file = parts / "options.json";
  std::unique_ptr<OutputLock> lock;
  std::string err;
  std::exception_ptr failure;
  if (group.rank() == 0) {
    try {
      std::error_code ec;
      fs::create_directories(parts, ec);
      if (!fs::is_directory(parts)) throw IoError(fmt::format("cannot create '{}'", parts.string()));
      lock = std::make_unique<OutputLock>((parts / lock_name).string(),
                                          sharded ? fmt::format("shard {} of the sweep '{}'", to_string(opt.shard), out)
                                                  : fmt::format("the sweep '{}'", out));
      // Parts from another sweep must not be mixed into this one: refused naming the differences, or with --force
      // discarded (every file but the lock this run holds).
      const nlohmann::json recorded = fs::exists(opt_file) ? parts_options(opt_file, opt) : options;
      if (recorded != options) {
        std::size_t finished = 0;
        for (const auto& e : fs::directory_iterator(parts)) finished += is_point_file(e.path());
        if (!opt.force)
          throw InvalidArgument(fmt::format(
              "'{}' holds {} finished grid points of an interrupted sweep with other options, so this run cannot "
              "resume it: {}; rerun with those options to resume it, or {} to discard them",
              parts.string(), finished, option_differences(options, recorded),
              sharded ? fmt::format("remove '{}'", parts.string()) : std::string("pass --force")));
        for (const auto& e : fs::directory_iterator(parts))
          if (e.path().filename() != lock_name) fs::remove_all(e.path());
      }
      if (!fs::exists(opt_file)) write_atomic(opt_file, options.dump(2));
      seed_parts();
    } catch (const std::exception& e) {
      failure = std::current_exception();
      err = e.what();
    }
  }
  if (group.size() == 1) {
    if (failure) std::rethrow_exception(failure);
    return lock;
  }
  const auto setup = group.all_gather(err);
  if (failure) std::rethrow_exception(failure);
  if (!setup[0].empty()) throw IoError("sweep not started: rank 0 failed to prepare the parts directory");
  std::string seen;
  std::error_code ec;
  if (!fs::exists(opt_file, ec))
    seen = fmt::format(
        "rank {} does not see '{}' (written by rank 0): the output must be on a filesystem shared "
        "by all ranks",
        group.rank(), opt_file.string());
  for (const auto& m : group.all_gather(seen))
    if (!m.empty()) throw IoError(m);
  return lock;
}

}  // namespace

nlohmann::json sweep_json(const ResultRow& row) {
  nlohmann::json j = to_json(row);
  j["dim"] = row.dim, j["points"] = row.points;
  return j;
}

bool sweep_extends(const SweepOptions& opt) {
  const nlohmann::json rec = finished_record(opt.out, opt.force);
  return !rec.is_null() && rec.value("options", nlohmann::json()) == resume_key(sweep_record(opt)) &&
         left_out(rec, opt).points.empty();
}

SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress) {
  SweepGroup one;
  return run_sweep(opt, provenance, progress, one);
}

namespace {

// The grid points this rank computes: i = first, first + step, ... (i = rank, rank + size, ... unsharded; in shard
// K/N the shard's points K, K + N, ... shared among the ranks alike).
struct Share {
  std::size_t first, step;
  std::size_t size(std::size_t n) const { return n > first ? (n - first + step - 1) / step : 0; }
};

Share share_of(const SweepShard& shard, const SweepGroup& group) {
  const std::size_t k = shard.count ? shard.index : 0, n = shard.count ? shard.count : 1;
  const auto rank = static_cast<std::size_t>(group.rank()), size = static_cast<std::size_t>(group.size());
  return {k + n * rank, n * size};
}

// Computes this rank's static share of the grid points into the parts directory; finished parts are skipped. Counts
// go into `report`; an error is thrown to the caller.
void compute_share(const SweepOptions& opt, const std::vector<GridPoint>& points, const fs::path& parts,
                   const SweepGroup& group, const std::function<void(const std::string&)>& progress,
                   SweepReport& report) {
  const bool may_stop = opt.stop_after && (opt.stop_rank < 0 || opt.stop_rank == group.rank());
  const Share mine = share_of(opt.shard, group);
  const std::size_t share = mine.size(points.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t done = 0;
  for (std::size_t i = mine.first; i < points.size(); i += mine.step) {
    ++done;
    const GridPoint& p = points[i];
    const fs::path part = parts / p.file();
    if (fs::exists(part)) {
      ++report.resumed;
      continue;
    }
    if (may_stop && report.computed == opt.stop_after) {
      if (opt.stop_killed) std::raise(SIGKILL);
      if (opt.stop_paused) {
        if (progress) progress("paused (testing hook): waiting for a signal");
        for (;;) ::pause();  // until a signal ends the process (SIGTERM from scancel: preemption)
      }
      throw IoError(fmt::format("sweep stopped after {} points (testing hook)", report.computed));
    }
    if (progress) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::size_t left = share - done + 1;
      progress(fmt::format("grid point {}/{} {}{}", done, share, p.label(),
                           report.computed ? ", ETA " + duration(secs / report.computed * left) : ""));
    }
    VarianceStudyOptions vo = opt.base;
    vo.sigmas = {p.sigma}, vo.dim = p.dim, vo.points = p.points, vo.features = p.features;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : run_variance_study(vo)) rows.push_back(to_json(r, vo));
    write_atomic(part, rows.dump());
    ++report.computed;
  }
}

// Rank 0: sums every rank's outcome (JSON {error, computed, resumed}) into `report` and throws naming the failed
// ranks and the lost grid points when a part of `points` (the run's share: the grid, or a shard's points) is missing.
void check_complete(const std::vector<std::string>& outcomes, const std::vector<GridPoint>& points,
                    const fs::path& parts, SweepReport& report) {
  report.computed = report.resumed = 0;
  std::vector<std::string> failed;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    const auto o = nlohmann::json::parse(outcomes[r]);
    report.computed += o["computed"].get<std::size_t>(), report.resumed += o["resumed"].get<std::size_t>();
    if (!o["error"].get<std::string>().empty())
      failed.push_back(fmt::format("rank {}: {}", r, o["error"].get<std::string>()));
  }
  std::vector<std::string> lost;
  for (const auto& p : points)
    if (!fs::exists(parts / p.file())) lost.push_back(p.label());
  if (failed.empty() && lost.empty()) return;
  throw IoError(
      fmt::format("sweep incomplete{}: {} of {} grid points lost: {}. Finished points are kept in '{}'; "
                  "rerun the same command (any number of ranks) to compute only the lost ones",
                  failed.empty() ? "" : fmt::format(" ({})", fmt::join(failed, "; ")), lost.size(), points.size(),
                  first_names(lost), parts.string()));
}

// The finished HDF5 file `out` from the parts (the table and the resume record), then the parts are removed.
void write_sweep_file(const std::string& out, bool replace, const std::vector<std::string>& estimators,
                      const nlohmann::json& provenance, const nlohmann::json& options,
                      const std::vector<GridPoint>& points, const fs::path& parts, int ranks,
                      const SweepReport& report) {
  H5Writer h5(out, replace);  // otherwise a file that appeared meanwhile is kept
  write_provenance(h5, provenance, Output::Sweep);
  h5.attr("/", "mpi_ranks", static_cast<std::int64_t>(ranks));
  h5.attr("/", "layout",
          "sweep/<estimator>/<column>[row]: one row per grid point (dim, points, features, sigma), "
          "each column with its description; rows whose status is not 0 (ok) say why in reason");
  write_table(h5, "/sweep", report.rows, estimators);
  nlohmann::json record = {{"options", resume_key(options)}, {"points", nlohmann::json::object()}};
  for (const auto& p : points) record["points"][p.file()] = nlohmann::json::parse(read_text(parts / p.file()));
  h5.write_text("/sweep/resume", record.dump(),
                {"JSON: the options (but the grid axes) and every grid point's results, so that the same sweep with "
                 "more grid values computes only the new points",
                 "none (a JSON string)"});
  h5.commit();
  std::error_code ec;
  fs::remove_all(parts, ec);
}

// The rows of `points` from their parts, in grid order.
// A broken part is named with redo(i), how to compute points[i] again.
std::vector<ResultRow> read_rows(const std::vector<GridPoint>& points, const fs::path& parts,
                                 const std::function<std::string(std::size_t)>& redo) {
  std::vector<ResultRow> rows;
  for (std::size_t i = 0; i < points.size(); ++i)
    for (const auto& r : read_part(parts / points[i].file(), redo(i))) rows.push_back(row_from_json(r));
  return rows;
}

}  // namespace

SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress, SweepGroup& group) {
  validate(opt);
  require(group.size() >= 1 && group.rank() >= 0 && group.rank() < group.size(), "invalid rank {} of {}", group.rank(),
          group.size());
  const bool sharded = opt.shard.count > 0;
  const fs::path parts = opt.out + ".parts";
  const nlohmann::json options = sweep_record(opt);
  const std::vector<GridPoint> points = grid(opt);
  std::vector<std::string> files;
  for (const auto& p : points) files.push_back(p.file());
  std::vector<GridPoint> run_points;  // this run's points: the grid, or the shard's points
  for (std::size_t i = sharded ? opt.shard.index : 0; i < points.size(); i += sharded ? opt.shard.count : 1)
    run_points.push_back(points[i]);
  const std::string redo = fmt::format("{} (only that grid point is computed again)",
                                       sharded ? "rerun shard " + to_string(opt.shard) : "rerun the same command");
  std::size_t reused = 0;
  const auto lock = prepare_parts(parts, opt, options, group, [&] {
    for (const auto& p : run_points)  // a broken part is named before anything is computed
      if (fs::exists(parts / p.file())) read_part(parts / p.file(), redo);
    reused = reuse_finished(opt.out, opt.force, parts, options, files);
    if (sharded) write_atomic(parts / shard_file(opt.shard, ".json"), provenance.dump(2));  // for the merge
  });
  if (progress && reused)
    progress(fmt::format("extending the finished sweep in {}: {} of its grid points are reused", opt.out, reused));
  // Said if SIGINT or SIGTERM stops the command line from here on (the parts are written atomically).
  const std::string again = sharded ? fmt::format(
                                          "run this shard again (resubmit the task) to resume, then `kestrel "
                                          "sweep merge {}`",
                                          opt.out)
                                    : "run the same command again to resume";
  struct Note {
    explicit Note(const std::string& text) { set_interrupt_note(text); }
    ~Note() { set_interrupt_note(""); }
  } note(group.rank() != 0 ? ""
                           : fmt::format("sweep{} interrupted: its finished grid points are kept in '{}'; {} (only the "
                                         "unfinished points are computed)",
                                         sharded ? " shard " + to_string(opt.shard) : "", parts.string(), again));

  // An error stops this rank only: the others finish their shares, so a rerun has as little as possible left to do.
  SweepReport report;
  std::exception_ptr failure;
  std::string err;
  try {
    compute_share(opt, points, parts, group, progress, report);
  } catch (const std::exception& e) {
    failure = std::current_exception();
    err = e.what();
  }
  if (group.size() == 1 && failure) {
    // Nothing to resume from: leave no empty parts directory behind (other shards' parts stay).
    std::error_code ec;
    if (report.computed == 0 && report.resumed == 0 && !sharded) fs::remove_all(parts, ec);
    std::rethrow_exception(failure);
  }

  // Rank 0 gathers every rank's outcome; the parts on disk say which grid points are done.
  std::vector<std::string> outcomes = {
      nlohmann::json{{"error", err}, {"computed", report.computed}, {"resumed", report.resumed}}.dump()};
  if (group.size() > 1) outcomes = group.all_gather(outcomes[0]);
  if (group.rank() != 0) {
    if (failure) std::rethrow_exception(failure);
    return report;
  }
  check_complete(outcomes, run_points, parts, report);
  report.rows = read_rows(run_points, parts, [&](std::size_t) { return redo; });
  if (progress && report.resumed) progress(fmt::format("resumed {} finished grid points", report.resumed));
  report.undefined = undefined_summary(report.rows);
  if (sharded) {
    report.total = points.size();
    for (const auto& f : files) report.finished += fs::exists(parts / f);
    return report;
  }
  write_sweep_file(opt.out, opt.force || sweep_extends(opt), opt.base.estimators, provenance, options, points, parts,
                   group.size(), report);
  return report;
}

namespace {

// The parts directory of `out` for the merge, with options.json: refused naming what it is when it is not.
void check_parts_dir(const fs::path& parts, const fs::path& opt_file, const std::string& out) {
  std::error_code ec;
  require(fs::is_directory(parts, ec) || !fs::exists(parts, ec),
          "nothing to merge: '{}' is not a directory; the shards of `kestrel sweep ... --out {} --shard K/N` write "
          "their grid points into the directory '{}': remove or rename that file, then rerun the shards",
          parts.string(), out, parts.string());
  require(fs::is_directory(parts, ec),
          "nothing to merge: '{}' does not exist; the shards of `kestrel sweep ... --out {} --shard K/N` (or of a "
          "Slurm job array) write their grid points there{}",
          parts.string(), out, fs::exists(out, ec) ? fmt::format(" ('{}' exists: merged already?)", out) : "");
  require(fs::exists(opt_file, ec), "'{}' has no options.json: it holds no parts of a kestrel sweep", parts.string());
}

// The shards that ran: their provenance records (shard-K-of-N.json), in name order, with the sweep's options.
struct ShardRecords {
  std::vector<nlohmann::json> records;
  std::vector<std::string> shards;  // "K/N" of each
  std::set<std::size_t> counts;     // the N that ran
};

ShardRecords read_shard_records(const fs::path& parts, const fs::path& opt_file, const nlohmann::json& options,
                                const std::string& out) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(parts)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("shard-", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  require(!files.empty(),
          "'{}' holds the parts of an interrupted sweep run without --shard: run that command again to resume and "
          "finish it (`kestrel sweep merge` assembles the parts of shards)",
          parts.string());
  ShardRecords r;
  for (const auto& f : files) {
    SweepShard s;
    require(std::sscanf(f.filename().c_str(), "shard-%zu-of-%zu.json", &s.index, &s.count) == 2 && s.count > 0,
            "'{}' is not named shard-K-of-N.json", f.string());
    r.records.push_back(read_shard_record(f, s, out));
    nlohmann::json there = r.records.back().at("options");  // the shard's provenance holds sweep_record's two parts
    there["inputs"] = r.records.back().value("inputs", nlohmann::json::object());
    require(there == options, "'{}' is a shard of another sweep than '{}': {}; remove the parts of the other sweep",
            f.string(), opt_file.string(), option_differences(options, there));
    r.shards.push_back(to_string(s));
    r.counts.insert(s.count);
  }
  return r;
}

// The shards that compute grid point i, for every N that ran: "0/2 or 1/3".
std::string shards_of(std::size_t i, const std::set<std::size_t>& counts) {
  std::vector<std::string> of;
  for (const std::size_t n : counts) of.push_back(fmt::format("{}/{}", i % n, n));
  return fmt::format("{}", fmt::join(of, " or "));
}

// Incomplete naming every grid point without its part, and its shards.
void check_all_parts(const std::vector<GridPoint>& points, const fs::path& parts, const std::set<std::size_t>& counts,
                     const std::string& out) {
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (!fs::exists(parts / points[i].file()))
      missing.push_back(fmt::format("#{} {} (shard {})", i, points[i].label(), shards_of(i, counts)));
  if (!missing.empty())
    throw Incomplete(fmt::format(
        "cannot merge '{}': {} of {} grid points are missing: {}. Run those shards again (resubmit the tasks; any "
        "shards of any N will do, finished points are skipped), then merge again; nothing was written",
        out, missing.size(), points.size(), first_names(missing)));
}

}  // namespace

SweepReport merge_sweep(const std::string& out, bool force) {
  require(!out.empty(), "`kestrel sweep merge` needs the sweep's output file OUT.h5");
  const fs::path parts = out + ".parts", opt_file = parts / "options.json";
  check_parts_dir(parts, opt_file, out);
  const nlohmann::json options = read_options(opt_file, "rerun any shard of the sweep (it records them again)");
  const ShardRecords shards = read_shard_records(parts, opt_file, options, out);

  // No sweep into OUT may run meanwhile: the lock of a one-process run and of every shard that left one.
  OutputLock lock((parts / "lock").string(), fmt::format("the sweep '{}'", out));
  std::vector<std::unique_ptr<OutputLock>> shard_locks;
  for (const auto& e : fs::directory_iterator(parts))
    if (e.path().extension() == ".lock")
      shard_locks.push_back(std::make_unique<OutputLock>(
          e.path().string(), fmt::format("{} of the sweep '{}'", e.path().stem().string(), out)));

  SweepOptions axes;
  axes.sigmas = options.at("sigma").get<std::vector<double>>();
  axes.dims = options.at("dim").get<std::vector<arma::uword>>();
  axes.points = options.at("points").get<std::vector<arma::uword>>();
  axes.features = options.at("features").get<std::vector<arma::uword>>();
  const nlohmann::json finished = finished_record(out, force);
  const bool extends = !finished.is_null() && finished.value("options", nlohmann::json()) == resume_key(options);
  if (extends && !force) check_keeps_finished(finished, axes, out, true);
  check_output(out, force || extends);
  const std::vector<GridPoint> points = grid(axes);
  check_all_parts(points, parts, shards.counts, out);

  SweepReport report;
  report.rows = read_rows(points, parts, [&](std::size_t i) {
    return fmt::format("rerun shard {} (only that grid point is computed again), then merge again",
                       shards_of(i, shards.counts));
  });
  report.resumed = report.finished = report.total = points.size();
  report.undefined = undefined_summary(report.rows);
  nlohmann::json prov = shards.records.front();
  prov["created_utc"] = provenance("", nlohmann::json::object())["created_utc"];
  prov["shards"] = shards.shards;
  report.provenance = prov;
  write_sweep_file(out, force || extends, options.at("estimators").get<std::vector<std::string>>(), prov, options,
                   points, parts, prov.value("mpi_ranks", 1), report);
  return report;
}

}  // namespace kestrel
