// Variance panels for the reproductions (see common.hpp).
#include "common.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "frontend/study_options.hpp"

namespace kestrel::experiments {

std::vector<VarianceResult> variance_panel(H5Writer& h5, const std::string& panel, const VarianceStudyOptions& vo,
                                           const Options& opt) {
  opt.say(fmt::format("panel {}: regime {}, {} sigmas, L = {}, {} set pairs", panel, vo.regime, vo.sigmas.size(),
                      vo.points, vo.pairs));
  const auto results = run_variance_study(vo, [&](const std::string& m) { opt.say("  " + m); });
  const std::string g = "/" + panel;
  h5.group(g);
  h5.attr(g, "options", record_study(vo).dump());
  h5.attr(g, "inputs", study_inputs(vo).dump());
  h5.attr(g, "regime", vo.regime);
  write_h5(h5, g, results, vo);
  return results;
}

double mean_log(const std::vector<VarianceResult>& r, const std::string& estimator, double sigma, bool relative) {
  for (const auto& x : r)
    if (x.estimator == estimator && std::abs(x.sigma - sigma) < 1e-12) {
      if (x.status != Status::Ok)
        throw NumericalError(fmt::format("{} at sigma {} is {}: {}", estimator, sigma, to_string(x.status), x.reason));
      return relative ? x.summary.log_rel_var.mean : x.summary.log_var.mean;
    }
  throw InvalidArgument(fmt::format("no result for {} at sigma {}", estimator, sigma));
}

RegimeOptions with_pipeline(RegimeOptions base, const std::string& pipeline) {
  const auto a = pipeline.find('/'), b = pipeline.find('/', a == std::string::npos ? a : a + 1);
  require(a != std::string::npos, "image pipeline must be preprocess/resize[/scale], got '{}'", pipeline);
  base.preprocess = parse_preprocess(pipeline.substr(0, a));
  base.resize = parse_resize(pipeline.substr(a + 1, b == std::string::npos ? b : b - a - 1));
  base.pixel_scale = b == std::string::npos ? 1.0 : validate_pixel_scale(std::stod(pipeline.substr(b + 1)));
  require(pipeline_name(base) == pipeline, "image pipeline '{}' is not canonical (expected '{}')", pipeline,
          pipeline_name(base));
  return base;
}

std::vector<double> sigma_grid(bool quick) {
  if (quick) return {0.1, 0.5, 1.0};
  std::vector<double> s;
  for (int k = 1; k <= 10; ++k) s.push_back(k / 10.0);
  return s;
}

}  // namespace kestrel::experiments
