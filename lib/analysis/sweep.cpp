// Resumable parameter sweeps (see sweep.hpp).
#include "analysis/sweep.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/hdf5.hpp"

namespace kestrel {

namespace fs = std::filesystem;

void validate(const SweepOptions& opt) {
  require(!opt.out.empty(), "a sweep needs --out FILE.h5");
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
  {
    std::ofstream f(tmp);
    if (!(f << text) || !f.flush()) throw IoError(fmt::format("cannot write '{}'", tmp.string()));
  }
  fs::rename(tmp, p);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

SweepReport run_sweep(const SweepOptions& opt, const nlohmann::json& provenance,
                      const std::function<void(const std::string&)>& progress) {
  validate(opt);
  const fs::path parts = opt.out + ".parts";
  const nlohmann::json options = to_json(opt);
  std::error_code ec;
  fs::create_directories(parts, ec);
  if (!fs::is_directory(parts)) throw IoError(fmt::format("cannot create '{}'", parts.string()));
  const fs::path opt_file = parts / "options.json";
  if (fs::exists(opt_file)) {
    // Parts from another sweep must not be mixed into this one.
    if (nlohmann::json::parse(read_text(opt_file)) != options)
      throw InvalidArgument(fmt::format("'{}' holds parts of a sweep with other options; remove it or rerun with the "
                                        "same options to resume",
                                        parts.string()));
  } else {
    write_atomic(opt_file, options.dump(2));
  }

  SweepReport report;
  for (auto d : opt.dims)
    for (auto L : opt.points)
      for (auto M : opt.features)
        for (double s : opt.sigmas) {
          const fs::path part = parts / fmt::format("d{}_L{}_M{}_s{:.17g}.json", d, L, M, s);
          nlohmann::json rows;
          if (fs::exists(part)) {
            rows = nlohmann::json::parse(read_text(part));
            ++report.resumed;
          } else {
            if (opt.stop_after && report.computed == opt.stop_after)
              throw IoError(fmt::format("sweep stopped after {} points (testing hook)", report.computed));
            if (progress) progress(fmt::format("grid point d={} L={} M={} sigma={}", d, L, M, s));
            VarianceStudyOptions vo = opt.base;
            vo.sigmas = {s}, vo.dim = d, vo.points = L, vo.features = M;
            rows = nlohmann::json::array();
            for (const auto& r : run_variance_study(vo)) rows.push_back(to_json(r, vo));
            write_atomic(part, rows.dump());
            ++report.computed;
          }
          for (const auto& r : rows) report.rows.push_back({r["estimator"], s, d, L, M, r});
        }
  if (progress && report.resumed) progress(fmt::format("resumed {} finished grid points", report.resumed));

  H5Writer h5(opt.out);
  h5.attr("/", "provenance", provenance.dump());
  h5.attr("/", "git_revision", provenance["git_revision"].get<std::string>());
  h5.attr("/", "options", options.dump());
  h5.attr("/", "seed", static_cast<std::int64_t>(opt.base.seed));
  h5.attr("/", "layout", "sweep/<estimator>/<column>[row]: one row per grid point (dim, points, features, sigma)");
  for (const auto& name : opt.base.estimators) {
    std::vector<double> dim, pts, feat, sig, mlv, slv, mlr, slr, nex;
    nlohmann::json params = nlohmann::json::array();
    for (const auto& r : report.rows) {
      if (r.estimator != name) continue;
      dim.push_back(r.dim), pts.push_back(r.points), feat.push_back(r.features), sig.push_back(r.sigma);
      mlv.push_back(r.result["mean_log_var"]), slv.push_back(r.result["std_log_var"]);
      mlr.push_back(r.result["mean_log_rel_var"]), slr.push_back(r.result["std_log_rel_var"]);
      nex.push_back(r.result["n_exact"].get<double>());
      params.push_back(r.result["params"]);
    }
    const std::string g = "/sweep/" + name;
    h5.group(g);
    h5.write(g + "/dim", dim), h5.write(g + "/points", pts), h5.write(g + "/features", feat);
    h5.write(g + "/sigma", sig);
    h5.write(g + "/mean_log_var", mlv), h5.write(g + "/std_log_var", slv);
    h5.write(g + "/mean_log_rel_var", mlr), h5.write(g + "/std_log_rel_var", slr);
    h5.write(g + "/n_exact", nex);
    h5.write_text(g + "/params", params.dump());
  }
  h5.commit();
  fs::remove_all(parts, ec);
  return report;
}

}  // namespace kestrel
