// Registry of estimator families (see registry.hpp).
#include "estimators/registry.hpp"

#include "core/error.hpp"
#include "estimators/dark/dark.hpp"
#include "estimators/derf/derf.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/hrf/cluster.hpp"
#include "estimators/hrf/hybrid.hpp"
#include "estimators/trig/trig_real.hpp"

namespace kestrel {

const std::vector<Family>& estimator_families() {
  static const std::vector<Family> families = {
      {"trig", "TrigRF, complex form exp(i w^T x) (CRT 2.2)", make_trig, true, {"TrigRF", "tab:blue", "o"}, Kind::Random},
      {"trig-real", "TrigRF, real form sqrt(2) cos(w^T x + theta) (DERF eq. 4-5)", make_trig_real, false, {"TrigRF (real)", "tab:blue", "s"}, Kind::Random},
      {"pos", "PosRF / FAVOR+ exp(w^T x - |x|^2/2) (CRT 2.2)", make_pos, false, {"PosRF", "tab:orange", "o"}, Kind::Random},
      {"gerf", "GERF, complex A and s fitted numerically (CRT Thm 3.1-3.2)", make_gerf, true, {"GERF", "tab:green", "^"}, Kind::Random},
      {"oprf", "OPRF / FAVOR++, closed-form rho* (CRT Thm 3.3)", make_oprf, false, {"OPRF", "tab:red", "o"}, Kind::Random},
      {"aderf", "ADERF, asymmetric dense-exponential RFs, SVD closed form (DERF Thm 4.2)", make_aderf, false, {"ADERF", "tab:olive", "v"}, Kind::Random},
      {"sderf", "SDERF, symmetric dense-exponential RFs, eigendecomposition (DERF Thm 4.3)", make_sderf, false, {"SDERF", "tab:cyan", "D"}, Kind::Random},
      {"saderf", "SADERF, GERF on (Psi x, Psi^-1 y), diagonal Psi (DERF 4.3)", make_saderf, false, {"SADERF", "k", "P"}, Kind::Random},
      {"pois", "PoisRF, Poisson discretely-induced RFs, closed-form lambda* (CRT 3.2.1)", make_pois, false, {"PoisRF", "tab:purple", "x"}, Kind::Random},
      {"geom", "GeomRF, geometric discretely-induced RFs, p by Brent (CRT 3.2.2)", make_geom, false, {"GeomRF", "tab:brown", "x"}, Kind::Random},
      {"pois+", "PoisRF+, PoisRF on points shifted to be positive (CRT 3.2.3)", make_pois_plus, false, {"PoisRF+", "tab:pink", "+"}, Kind::Random, make_pois_plus_from_reference},
      {"geom+", "GeomRF+, GeomRF on points shifted to be positive (CRT 3.2.3)", make_geom_plus, false, {"GeomRF+", "tab:gray", "+"}, Kind::Random, make_geom_plus_from_reference},
      {"pos-hyp", "PosRF, hyperbolic form exp(+-w^T x - |x|^2/2) (HRF eq. 3)", make_pos_hyp, false, {"PosRF (hyperbolic)", "tab:orange", "s"}, Kind::Random},
      {"hrf-angular", "angular hybrid of pos-hyp and trig, lambda = theta/pi by sign features (HRF eq. 19)", make_hrf_angular, false, {"HRF angular", "tab:purple", "^"}, Kind::Hybrid},
      {"hrf-gauss", "Gaussian-lambda hybrid of pos-hyp and trig (HRF eq. 20, appendix F)", make_hrf_gauss, false, {"HRF Gaussian", "tab:pink", "v"}, Kind::Hybrid},
      {"hrf-cluster", "clustered HRF, k-means k = 2, real diagonal A per centre pair (HRF H.2 eq. 88)", make_hrf_cluster, false, {"HRF clustered", "tab:brown", "D"}, Kind::Hybrid},
      {"hrf-cluster-complex", "clustered HRF, complex diagonal A exact at centres (HRF H.2 eq. 85-87)", make_hrf_cluster_complex, true, {"HRF clustered (complex)", "tab:green", "D"}, Kind::Hybrid},
      {"dark", "DARK importance-weighted PRF, optimal proposal N(0, Sigma*) (DARK eq. 2, Thm 3.2)", make_dark, false, {"DARK", "tab:green", "*"}, Kind::Random},
      {"dark-iso", "DARK importance-weighted PRF, best isotropic proposal N(0, tau I)", make_dark_iso, false, {"DARK isotropic", "tab:olive", "*"}, Kind::Random},
  };
  return families;
}

std::string to_string(Kind k) { return k == Kind::Hybrid ? "hybrid" : "random"; }

nlohmann::json families_json() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& f : estimator_families())
    j.push_back({{"name", f.name},
                 {"description", f.description},
                 {"label", f.style.label},
                 {"color", f.style.color},
                 {"marker", f.style.marker},
                 {"kind", to_string(f.kind)},
                 {"complex_valued", f.complex_valued}});
  return j;
}

const Family& find_family(const std::string& name) {
  // Learned LUNA maps (estimators/luna) are trained, deterministic maps: no variance to report, no factory here.
  if (name.rfind("luna", 0) == 0)
    throw InvalidArgument(fmt::format("'{}' is a learned deterministic feature map: it has zero variance and a bias, so "
                                      "variance commands do not apply; see `kestrel reproduce luna`", name));
  std::string known;
  for (const auto& f : estimator_families()) {
    if (f.name == name) return f;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  throw InvalidArgument(fmt::format("unknown estimator '{}' (known: {})", name, known));
}

bool halved_by_halve_real(const std::string& family) { return !find_family(family).complex_valued; }

std::unique_ptr<Estimator> make_estimator_from_reference(const std::string& name, const arma::mat& Q,
                                                         const arma::mat& T) {
  const Family& f = find_family(name);
  validate_sets(Q, T);
  return f.make_from_reference ? f.make_from_reference(Q, T) : f.make(Q, T);
}

std::unique_ptr<Estimator> make_estimator(const std::string& name, const arma::mat& X, const arma::mat& Y) {
  const Family& f = find_family(name);
  validate_sets(X, Y);
  return f.make(X, Y);
}

}  // namespace kestrel
