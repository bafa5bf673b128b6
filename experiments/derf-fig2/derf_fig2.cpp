// DERF Fig. 1 right / Fig. 2 / section 5.1 / appendix B.2: log relative variance Var/K of TrigRF (cos
// form), PosRF, GERF (kestrel's oprf: real A, s = +1, the DERF paper's GERF), ADERF and SDERF with
// M = 1, softmax kernel, in normal, sphere, heterogen, mnist, cifar10 and mnist/cifar10, d = 64,
// L = 1024, 5 set pairs, sigma 0.1..1, parameters fitted per set pair. Protocol `kestrel` (default): raw
// [0,1] pixels, area resize; protocol `standardize/bilinear` (kPaperPipeline): the image pipeline most
// consistent with both CRT's and DERF's mnist / cifar10 claims (docs/mnist-pipelines.md).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common.hpp"
#include "data/regimes.hpp"

namespace kestrel::experiments {

void run_derf_fig2(const Options& opt, H5Writer& h5, std::vector<Claim>& claims) {
  const std::vector<std::pair<std::string, std::string>> panels = {
      {"normal", "normal"}, {"sphere", "sphere"},   {"heterogen", "heterogen"},
      {"mnist", "mnist"},   {"cifar10", "cifar10"}, {"mnist-cifar10", "mnist/cifar10"}};
  const bool pipeline = opt.protocol == kPaperPipeline;
  std::map<std::string, std::vector<VarianceResult>> res;
  std::string names;
  for (const auto& [panel, regime] : panels) {
    VarianceStudyOptions vo;
    vo.regime = regime;
    vo.sigmas = sigma_grid(opt.quick);
    vo.dim = 64;
    vo.points = opt.quick ? 64 : 1024;
    vo.pairs = opt.quick ? 2 : 5;
    vo.seed = opt.seed;
    vo.estimators = {"trig-real", "pos", "oprf", "aderf", "sderf"};
    vo.kernel = Kernel::softmax();
    vo.regime_options = opt.regime_options;
    if (pipeline && find_regime(regime).images) vo.regime_options = with_pipeline(opt.regime_options, kPaperPipeline);
    res[panel] = variance_panel(h5, panel, vo, opt);
    names += (names.empty() ? "" : " ") + panel;
  }
  h5.attr("/", "panels", names);
  const std::string pixels = pipeline ? "image pipeline " + kPaperPipeline : "raw pixels";
  const std::string settings = fmt::format(
      "{}, sigma=1, {}", opt.quick ? "quick: d=64, L=64, 2 set pairs" : "d=64, L=1024, 5 set pairs", pixels);
  auto gain = [&](const std::string& panel, const std::string& est) {
    return mean_log(res[panel], "oprf", 1.0, true) - mean_log(res[panel], est, 1.0, true);
  };
  // Which image pipelines reproduce each image claim: scripts/mnist_pipelines.py, docs/mnist-pipelines.md.
  const std::map<std::string, std::string> which = {
      {"mnist",
       "docs/mnist-pipelines.md: holds with raw [0,1] pixels (any resize) only; standardised pixels give e^8-e^35"},
      {"cifar10",
       "docs/mnist-pipelines.md: no pipeline reproduces it (closest: standardize/bilinear and mnist-norm/bilinear, "
       "about e^15.5; raw [0,1] gives e^25, centred e^1.7)"},
      {"mnist-cifar10",
       "docs/mnist-pipelines.md: no pipeline reproduces it (raw [0,1] gives e^13-e^14, centred e^0.9, standardised "
       "e^10-e^20)"},
      {"aderf",
       "docs/mnist-pipelines.md: holds with centred [0,1] pixels only (e^1.8-e^2.3); raw gives e^5.4-e^5.8, "
       "standardised "
       "e^6.6-e^11"}};
  auto note = [&](const std::string& key) { return which.count(key) ? "; " + which.at(key) : std::string(); };
  // The paper names no sigma for its "about e^c" claims; kestrel reads them at sigma = 1, the end of Fig. 2's range,
  // where the gaps are largest. Where the gap lies within c +- c/2 over the grid, said per claim.
  auto over_sigma = [&](const std::string& panel, const std::string& est, double c) {
    std::vector<double> inside;
    for (double sg : sigma_grid(opt.quick)) {
      const double gap = mean_log(res[panel], "oprf", sg, true) - mean_log(res[panel], est, sg, true);
      if (std::abs(gap - c) <= c / 2) inside.push_back(sg);
    }
    const double half = mean_log(res[panel], "oprf", 0.5, true) - mean_log(res[panel], est, 0.5, true);
    return fmt::format(
        "the paper names no sigma (read at sigma = 1); the gap grows with sigma, e^{:.1f} at sigma = "
        "0.5; within e^{}+-{} {}",
        half, c, c / 2,
        inside.empty()       ? std::string("at no sigma of the grid")
        : inside.size() == 1 ? fmt::format("at sigma = {} only", inside.front())
                             : fmt::format("for sigma in [{}, {}]", inside.front(), inside.back()));
  };
  // "about e^5" is read as 5 +- 2.5 nats (half the claimed exponent), "about e^10" as 10 +- 5.
  for (const auto& [panel, c] : std::vector<std::pair<std::string, double>>{
           {"heterogen", 5}, {"mnist", 5}, {"mnist-cifar10", 5}, {"cifar10", 10}})
    claims.push_back(
        {"DERF 5.1", fmt::format("SDERFs are about e^{} times better than GERFs in {}", c, panel),
         "mean log(Var/K) GERF - SDERF", "~", c, gain(panel, "sderf"), c / 2, settings,
         (panel == "heterogen" ? std::string() : pixels + note(panel) + "; ") + over_sigma(panel, "sderf", c)});
  claims.push_back({"DERF 5.1", "ADERFs outperform GERFs by around e^3 times in mnist/cifar10",
                    "mean log(Var/K) GERF - ADERF", "~", 3, gain("mnist-cifar10", "aderf"), 1.5, settings,
                    pixels + note("aderf") + "; " + over_sigma("mnist-cifar10", "aderf", 3)});
  const double s = 1.0;
  for (const auto& [panel, r] : res)
    claims.push_back(
        {"DERF 5.1", fmt::format("SDERFs outperform or are on par with other methods ({})", panel),
         "mean log(Var/K) SDERF - min over GERF, ADERF, PosRF, TrigRF", "<", 0.5,
         mean_log(r, "sderf", s, true) - std::min({mean_log(r, "oprf", s, true), mean_log(r, "aderf", s, true),
                                                   mean_log(r, "pos", s, true), mean_log(r, "trig-real", s, true)}),
         0, settings,
         "'on par' read as within 0.5 nats" +
             (res.count(panel) && (panel == "mnist" || panel == "cifar10" || panel == "mnist-cifar10")
                  ? "; " + pixels +
                        "; docs/mnist-pipelines.md: holds in all three image sets with every pipeline except centred "
                        "[0,1] pixels and raw/bilinear-aa"
                  : std::string())});
}

}  // namespace kestrel::experiments
