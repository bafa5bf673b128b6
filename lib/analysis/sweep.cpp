// Resumable parameter sweeps (see sweep.hpp).
#include "analysis/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "io/hdf5.hpp"
#include "io/hdf5_reader.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"

namespace kestrel {

namespace fs = std::filesystem;

namespace {
void check_extension(const SweepOptions& opt);
}  // namespace

void validate(const SweepOptions& opt) {
  require(!opt.out.empty(), "a sweep needs --out FILE.h5 (missing, or an empty path)");
  if (!opt.force) check_extension(opt);
  check_output(opt.out, opt.force || sweep_extends(opt));  // extending a finished sweep needs no --force
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

nlohmann::json to_json(const SweepOptions& opt) {
  nlohmann::json j = to_json(opt.base);
  j.erase("sigmas"), j.erase("dim"), j.erase("points"), j.erase("features");
  j["sweep_sigmas"] = opt.sigmas;
  j["sweep_dims"] = opt.dims;
  j["sweep_points"] = opt.points;
  j["sweep_features"] = opt.features;
  return j;
}

namespace {

void write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
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
  for (const char* axis : {"sweep_sigmas", "sweep_dims", "sweep_points", "sweep_features"}) k.erase(axis);
  return k;
}

// The command-line name of a key of to_json(SweepOptions) ("sweep_sigmas" -> "--sigma", "regime_options.x_file" ->
// "--x-file"); "" for keys that only repeat another one (kernel_alpha, image_conversion).
std::string option_name(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"sweep_sigmas", "sigma"},      {"sigmas", "sigma"}, {"sweep_dims", "dim"}, {"sweep_points", "points"},
      {"sweep_features", "features"}, {"mc_reps", "mc"},   {"kernel_alpha", ""},  {"image_conversion", ""}};
  if (const auto it = names.find(key); it != names.end()) return it->second.empty() ? "" : "--" + it->second;
  if (key == "halve_real_rule") return "the --halve-real rule (another kestrel version)";
  if (key.size() > 7 && key.compare(key.size() - 7, 7, "_sha256") == 0) {
    std::string f = key.substr(0, key.size() - 7);
    std::replace(f.begin(), f.end(), '_', '-');
    return "the contents of --" + f + " (sha256)";
  }
  std::string n = key;
  std::replace(n.begin(), n.end(), '_', '-');
  return "--" + n;
}

// Each option that differs between this run's options and those recorded with finished points, as
// "--seed 2 here, 1 there; --kernel 'gaussian' here, 'softmax' there" (nested objects flattened, lists comma-joined).
std::string option_differences(const nlohmann::json& here, const nlohmann::json& there) {
  std::vector<std::string> out;
  std::function<void(const nlohmann::json&, const nlohmann::json&)> walk = [&](const nlohmann::json& a,
                                                                               const nlohmann::json& b) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      const nlohmann::json x = a.value(k, nlohmann::json()), y = b.value(k, nlohmann::json());
      if (x == y) continue;
      if (x.is_object() && y.is_object()) {
        walk(x, y);
        continue;
      }
      const std::string name = option_name(k);
      if (name.empty()) continue;
      const auto show = [](const nlohmann::json& j) {
        if (j.is_null()) return std::string("(none)");
        if (j.is_string()) return "'" + j.get<std::string>() + "'";
        if (!j.is_array()) return j.dump();
        std::string list;
        for (const auto& item : j)
          list += (list.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
        return "'" + list + "'";
      };
      out.push_back(fmt::format("{} {} here, {} there", name, show(x), show(y)));
    }
  };
  walk(here, there);
  if (out.empty()) return "the options recorded by another kestrel version";
  return fmt::format("{}", fmt::join(out, "; "));
}

// The /sweep/resume record of a finished sweep in `out` ({"options", "points": {part file: rows}}), or null
// when `out` is not a finished sweep's file.
nlohmann::json finished_record(const std::string& out) {
  std::error_code ec;
  if (!fs::is_regular_file(out, ec)) return nullptr;
  try {
    const H5Reader h5(out);
    if (!h5.exists("/sweep/resume")) return nullptr;
    return nlohmann::json::parse(h5.read_text("/sweep/resume"));
  } catch (const std::exception&) {
    return nullptr;  // not HDF5 or not ours: the caller's overwrite rules apply
  }
}

// A finished sweep in opt.out with other options (but the grid axes) cannot be extended by this run: the error names
// each option that differs with both values and says what --force discards.
void check_extension(const SweepOptions& opt) {
  const nlohmann::json rec = finished_record(opt.out);
  if (rec.is_null()) return;
  const nlohmann::json here = resume_key(to_json(opt)), there = rec.value("options", nlohmann::json());
  if (here == there) return;
  throw InvalidArgument(fmt::format(
      "output '{}' exists and holds a finished sweep with other options, so this run cannot extend it: {}; rerun "
      "with its options to extend it, or pass --force to replace it (discarding its {} finished grid points)",
      opt.out, option_differences(here, there), rec.value("points", nlohmann::json::object()).size()));
}

// Copies the rows of grid points that a finished sweep in `out` already holds into the parts directory,
// so that extending a sweep by a grid value computes only the new points. Returns how many were reused.
std::size_t reuse_finished(const std::string& out, const fs::path& parts, const nlohmann::json& options,
                           const std::vector<std::string>& files) {
  const nlohmann::json rec = finished_record(out);
  if (rec.is_null() || rec.value("options", nlohmann::json()) != resume_key(options)) return 0;
  std::size_t n = 0;
  for (const auto& f : files)
    if (rec["points"].contains(f) && !fs::exists(parts / f)) {
      write_atomic(parts / f, rec["points"][f].dump());
      ++n;
    }
  return n;
}

// Rank 0 creates OUT.parts/, locks it, checks that its parts belong to this sweep and seeds it with the
// grid points a finished sweep in OUT already holds; the other ranks then check that they see it (a sweep
// over several machines needs OUT on a shared filesystem).
std::unique_ptr<OutputLock> prepare_parts(const fs::path& parts, const std::string& out, const nlohmann::json& options,
                                          bool force, SweepGroup& group, const std::function<void()>& seed_parts) {
  const fs::path opt_file = parts / "options.json";
  std::unique_ptr<OutputLock> lock;
  std::string err;
  std::exception_ptr failure;
  if (group.rank() == 0) {
    try {
      std::error_code ec;
      fs::create_directories(parts, ec);
      if (!fs::is_directory(parts)) throw IoError(fmt::format("cannot create '{}'", parts.string()));
      lock = std::make_unique<OutputLock>((parts / "lock").string(), fmt::format("the sweep '{}'", out));
      // Parts from another sweep must not be mixed into this one: refused naming the differences, or with --force
      // discarded (every file but the lock this run holds).
      const nlohmann::json recorded = fs::exists(opt_file) ? nlohmann::json::parse(read_text(opt_file)) : options;
      if (recorded != options) {
        std::size_t finished = 0;
        for (const auto& e : fs::directory_iterator(parts))
          finished += e.path().extension() == ".json" && e.path().filename() != "options.json";
        if (!force)
          throw InvalidArgument(fmt::format(
              "'{}' holds {} finished grid points of an interrupted sweep with other options, so this run cannot "
              "resume it: {}; rerun with those options to resume it, or pass --force to discard them",
              parts.string(), finished, option_differences(options, recorded)));
        for (const auto& e : fs::directory_iterator(parts))
          if (e.path().filename() != "lock") fs::remove_all(e.path());
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
  const nlohmann::json rec = finished_record(opt.out);
  return !rec.is_null() && rec.value("options", nlohmann::json()) == resume_key(to_json(opt));
}

SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress) {
  SweepGroup one;
  return run_sweep(opt, provenance, progress, one);
}

namespace {

// Computes this rank's static share of the grid points into the parts directory (points i = rank, rank + N, ...);
// finished parts are skipped. Counts go into `report`; an error is thrown to the caller.
void compute_share(const SweepOptions& opt, const std::vector<GridPoint>& points, const fs::path& parts,
                   const SweepGroup& group, const std::function<void(const std::string&)>& progress,
                   SweepReport& report) {
  const bool may_stop = opt.stop_after && (opt.stop_rank < 0 || opt.stop_rank == group.rank());
  const std::size_t share = (points.size() - group.rank() + group.size() - 1) / group.size();
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t done = 0;
  for (std::size_t i = group.rank(); i < points.size(); i += group.size()) {
    ++done;
    const GridPoint& p = points[i];
    const fs::path part = parts / p.file();
    if (fs::exists(part)) {
      ++report.resumed;
      continue;
    }
    if (may_stop && report.computed == opt.stop_after) {
      if (opt.stop_killed) std::raise(SIGKILL);
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
// ranks and the lost grid points when a part is missing.
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
  constexpr std::size_t kShown = 20;
  std::string names;
  for (std::size_t i = 0; i < lost.size() && i < kShown; ++i) names += (i ? "; " : "") + lost[i];
  if (lost.size() > kShown) names += fmt::format("; and {} more", lost.size() - kShown);
  throw IoError(
      fmt::format("sweep incomplete{}: {} of {} grid points lost: {}. Finished points are kept in '{}'; "
                  "rerun the same command (any number of ranks) to compute only the lost ones",
                  failed.empty() ? "" : fmt::format(" ({})", fmt::join(failed, "; ")), lost.size(), points.size(),
                  names, parts.string()));
}

// Rank 0: the finished HDF5 file from the parts (the table and the resume record), then the parts are removed.
void write_sweep_file(const SweepOptions& opt, const nlohmann::json& provenance, const nlohmann::json& options,
                      const std::vector<GridPoint>& points, const fs::path& parts, int ranks,
                      const SweepReport& report) {
  H5Writer h5(opt.out, opt.force || sweep_extends(opt));  // otherwise a file that appeared meanwhile is kept
  write_provenance(h5, provenance);
  h5.attr("/", "mpi_ranks", static_cast<std::int64_t>(ranks));
  h5.attr("/", "layout",
          "sweep/<estimator>/<column>[row]: one row per grid point (dim, points, features, sigma), "
          "each column with its description; rows whose status is not 0 (ok) say why in reason");
  write_table(h5, "/sweep", report.rows, opt.base.estimators);
  nlohmann::json record = {{"options", resume_key(options)}, {"points", nlohmann::json::object()}};
  for (const auto& p : points) record["points"][p.file()] = nlohmann::json::parse(read_text(parts / p.file()));
  h5.write_text("/sweep/resume", record.dump());
  h5.describe("/sweep/resume",
              "JSON: the options (but the grid axes) and every grid point's results, so that the same sweep with "
              "more grid values computes only the new points",
              "none (a JSON string)");
  h5.commit();
  std::error_code ec;
  fs::remove_all(parts, ec);
}

}  // namespace

SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress, SweepGroup& group) {
  validate(opt);
  require(group.size() >= 1 && group.rank() >= 0 && group.rank() < group.size(), "invalid rank {} of {}", group.rank(),
          group.size());
  const fs::path parts = opt.out + ".parts";
  const nlohmann::json options = to_json(opt);
  const std::vector<GridPoint> points = grid(opt);
  std::vector<std::string> files;
  for (const auto& p : points) files.push_back(p.file());
  std::size_t reused = 0;
  const auto lock = prepare_parts(parts, opt.out, options, opt.force, group,
                                  [&] { reused = reuse_finished(opt.out, parts, options, files); });
  if (progress && reused)
    progress(fmt::format("extending the finished sweep in {}: {} of its grid points are reused", opt.out, reused));
  // Said if SIGINT or SIGTERM stops the command line from here on (the parts are written atomically).
  struct Note {
    explicit Note(const std::string& text) { set_interrupt_note(text); }
    ~Note() { set_interrupt_note(""); }
  } note(group.rank() != 0 ? ""
                           : fmt::format("sweep interrupted: its finished grid points are kept in '{}'; run the same "
                                         "command again to resume (only the unfinished points are computed)",
                                         parts.string()));

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
    // Nothing to resume from: leave no empty parts directory behind.
    std::error_code ec;
    if (report.computed == 0 && report.resumed == 0) fs::remove_all(parts, ec);
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
  check_complete(outcomes, points, parts, report);
  for (const auto& p : points)
    for (const auto& r : nlohmann::json::parse(read_text(parts / p.file()))) report.rows.push_back(row_from_json(r));
  if (progress && report.resumed) progress(fmt::format("resumed {} finished grid points", report.resumed));
  report.undefined = undefined_summary(report.rows);
  write_sweep_file(opt, provenance, options, points, parts, group.size(), report);
  return report;
}

}  // namespace kestrel
