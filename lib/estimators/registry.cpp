// Registry of estimator families (see registry.hpp).
#include "estimators/registry.hpp"

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/error.hpp"
#include "estimators/antithetic/antithetic.hpp"
#include "estimators/dark/dark.hpp"
#include "estimators/derf/derf.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/gerf/gerf.hpp"
#include "estimators/hrf/cluster.hpp"
#include "estimators/hrf/hybrid.hpp"
#include "estimators/luna/luna.hpp"
#include "estimators/trig/trig_real.hpp"

namespace kestrel {

namespace {

const std::vector<Family>& builtin_families() {
  using enum Kind;
  static const std::vector<Family> families = {
      {.name = "trig",
       .description = "TrigRF, complex form exp(i w^T x) (CRT 2.2)",
       .kind = Random,
       .make = make_trig,
       .restore = restore_gerf,
       .complex_valued = true,
       .style = {"TrigRF", "tab:blue", "o"},
       .default_study = true,
       .has_three_point_form = true,
       .has_isotropic_form = true},
      {.name = "trig-real",
       .description = "TrigRF, real form sqrt(2) cos(w^T x + theta) (DERF eq. 4-5)",
       .kind = Random,
       .make = make_trig_real,
       .restore = restore_trig_real,
       .style = {"TrigRF (real)", "tab:blue", "s"},
       .has_three_point_form = true},
      {.name = "pos",
       .description = "PosRF / FAVOR+ exp(w^T x - |x|^2/2) (CRT 2.2)",
       .kind = Random,
       .make = make_pos,
       .restore = restore_gerf,
       .style = {"PosRF", "tab:orange", "o"},
       .default_study = true,
       .has_three_point_form = true,
       .has_isotropic_form = true},
      {.name = "gerf",
       .description = "GERF, complex A and s fitted numerically (CRT Thm 3.1-3.2)",
       .kind = Random,
       .make = make_gerf,
       .restore = restore_gerf,
       .complex_valued = true,
       .style = {"GERF", "tab:green", "^"},
       .default_study = true,
       .has_three_point_form = true,
       .has_isotropic_form = true},
      {.name = "oprf",
       .description = "OPRF / FAVOR++, closed-form rho* (CRT Thm 3.3)",
       .kind = Random,
       .make = make_oprf,
       .restore = restore_gerf,
       .style = {"OPRF", "tab:red", "o"},
       .default_study = true,
       .default_features = true,
       .has_three_point_form = true,
       .has_isotropic_form = true},
      {.name = "aderf",
       .description = "ADERF, asymmetric dense-exponential RFs, SVD closed form (DERF Thm 4.2)",
       .kind = Random,
       .make = make_aderf,
       .restore = restore_derf,
       .style = {"ADERF", "tab:olive", "v"},
       .has_three_point_form = true},
      {.name = "sderf",
       .description = "SDERF, symmetric dense-exponential RFs, eigendecomposition (DERF Thm 4.3)",
       .kind = Random,
       .make = make_sderf,
       .restore = restore_derf,
       .style = {"SDERF", "tab:cyan", "D"},
       .has_three_point_form = true},
      {.name = "saderf",
       .description = "SADERF, GERF on (Psi x, Psi^-1 y), diagonal Psi (DERF 4.3)",
       .kind = Random,
       .make = make_saderf,
       .restore = restore_derf,
       .style = {"SADERF", "k", "P"},
       .has_three_point_form = true},
      {.name = "pois",
       .description = "PoisRF, Poisson discretely-induced RFs, closed-form lambda* (CRT 3.2.1)",
       .kind = Random,
       .make = make_pois,
       .restore = restore_discrete,
       .style = {"PoisRF", "tab:purple", "x"}},
      {.name = "geom",
       .description = "GeomRF, geometric discretely-induced RFs, p by Brent (CRT 3.2.2)",
       .kind = Random,
       .make = make_geom,
       .restore = restore_discrete,
       .style = {"GeomRF", "tab:brown", "x"}},
      {.name = "pois+",
       .description = "PoisRF+, PoisRF on points shifted to be positive (CRT 3.2.3)",
       .kind = Random,
       .make = make_pois_plus,
       .restore = restore_discrete,
       .style = {"PoisRF+", "tab:pink", "+"},
       .make_from_reference = make_pois_plus_from_reference},
      {.name = "geom+",
       .description = "GeomRF+, GeomRF on points shifted to be positive (CRT 3.2.3)",
       .kind = Random,
       .make = make_geom_plus,
       .restore = restore_discrete,
       .style = {"GeomRF+", "tab:gray", "+"},
       .make_from_reference = make_geom_plus_from_reference},
      {.name = "pos-anti",
       .description = "PosRF with antithetic pairs (w, -w): floor(M/2) pairs, plus one unpaired w for odd M",
       .kind = Random,
       .make = make_pos_anti,
       .restore = restore_pos_anti,
       .style = {"PosRF (antithetic)", "goldenrod", "d", "--"}},
      {.name = "pos-hyp",
       .description = "PosRF, hyperbolic form exp(+-w^T x - |x|^2/2) (HRF eq. 3)",
       .kind = Random,
       .make = make_pos_hyp,
       .restore = restore_pos_hyp,
       .style = {"PosRF (hyperbolic)", "tab:orange", "s", "--"}},
      {.name = "hrf-angular",
       .description = "angular hybrid of pos-hyp and trig, lambda = theta/pi by sign features (HRF eq. 19)",
       .kind = Hybrid,
       .make = make_hrf_angular,
       .restore = restore_hybrid,
       .style = {"HRF angular", "tab:purple", "^"},
       .draws_for_columns = hybrid_draws_for_columns,
       .make_for_budget = make_hrf_angular_for_budget},
      {.name = "hrf-gauss",
       .description = "Gaussian-lambda hybrid of pos-hyp and trig (HRF eq. 20, appendix F)",
       .kind = Hybrid,
       .make = make_hrf_gauss,
       .restore = restore_hybrid,
       .style = {"HRF Gaussian", "tab:pink", "v"},
       .draws_for_columns = hybrid_draws_for_columns,
       .make_for_budget = make_hrf_gauss_for_budget},
      {.name = "hrf-cluster",
       .description = "clustered HRF, k-means k = 2, real diagonal A per centre pair (HRF H.2 eq. 88)",
       .kind = Hybrid,
       .make = make_hrf_cluster,
       .restore = restore_hrf_cluster,
       .style = {"HRF clustered", "tab:brown", "D"},
       .draws_for_columns = cluster_draws_for_columns},
      {.name = "hrf-cluster-complex",
       .description = "clustered HRF, complex diagonal A exact at centres (HRF H.2 eq. 85-87)",
       .kind = Hybrid,
       .make = make_hrf_cluster_complex,
       .restore = restore_hrf_cluster,
       .complex_valued = true,
       .style = {"HRF clustered (complex)", "tab:green", "D"},
       .draws_for_columns = cluster_draws_for_columns},
      {.name = "dark",
       .description = "DARK importance-weighted PRF, optimal proposal N(0, Sigma*) (DARK eq. 2, Thm 3.2)",
       .kind = Random,
       .make = make_dark,
       .restore = restore_dark,
       .style = {"DARK", "tab:green", "*"},
       .has_three_point_form = true},
      {.name = "dark-iso",
       .description = "DARK importance-weighted PRF, best isotropic proposal N(0, tau I)",
       .kind = Random,
       .make = make_dark_iso,
       .restore = restore_dark,
       .style = {"DARK isotropic", "tab:olive", "*"},
       .has_three_point_form = true},
      {.name = "luna-fixed-rff",
       .description =
           "LUNA learned map, fixed-rff variant (LUNA 3.2): no variance, trained by `kestrel reproduce luna`",
       .kind = Learned,
       .make_map = [](const arma::mat& X, const arma::mat&) -> std::unique_ptr<FeatureMap> {
         return make_luna_initial(LunaVariant::FixedRff, X.n_rows);
       },
       .style = {"LUNA fixed-rff", "k", "o", ":"}},
      {.name = "luna-bank-coef",
       .description =
           "LUNA learned map, bank-coef variant (LUNA 3.2): no variance, trained by `kestrel reproduce luna`",
       .kind = Learned,
       .make_map = [](const arma::mat& X, const arma::mat&) -> std::unique_ptr<FeatureMap> {
         return make_luna_initial(LunaVariant::BankCoef, X.n_rows);
       },
       .style = {"LUNA bank-coef", "tab:green", "o", "--"}},
      {.name = "luna-gated",
       .description = "LUNA learned map, gated variant (LUNA 3.2): no variance, trained by `kestrel reproduce luna`",
       .kind = Learned,
       .make_map = [](const arma::mat& X, const arma::mat&) -> std::unique_ptr<FeatureMap> {
         return make_luna_initial(LunaVariant::Gated, X.n_rows);
       },
       .style = {"LUNA gated", "tab:purple", "o", "--"}},
      {.name = "luna-ungated",
       .description = "LUNA learned map, ungated variant (LUNA 3.2): no variance, trained by `kestrel reproduce luna`",
       .kind = Learned,
       .make_map = [](const arma::mat& X, const arma::mat&) -> std::unique_ptr<FeatureMap> {
         return make_luna_initial(LunaVariant::Ungated, X.n_rows);
       },
       .style = {"LUNA ungated", "magenta", "o", "-"}},
  };
  return families;
}

// Families registered at run time (Python estimators). A deque keeps references valid when it grows; a replaced
// family stays in it (shadowed by the newer entry), so a `const Family&` from find_family never dangles.
struct RuntimeFamilies {
  std::mutex mutex;
  std::deque<Family> all;
};
RuntimeFamilies& runtime() {
  static RuntimeFamilies r;
  return r;
}

// The newest runtime family called `name`, or nullptr; the caller holds the mutex.
const Family* find_runtime(const std::string& name) {
  const auto& all = runtime().all;
  const auto it = std::find_if(all.rbegin(), all.rend(), [&](const Family& f) { return f.name == name; });
  return it == all.rend() ? nullptr : &*it;
}

}  // namespace

std::vector<Family> estimator_families() {
  std::vector<Family> out = builtin_families();
  std::lock_guard lock(runtime().mutex);
  for (const auto& f : runtime().all)
    if (find_runtime(f.name) == &f) out.push_back(f);
  return out;
}

void register_family(Family f, bool replace) {
  require(!f.name.empty() && f.name.find_first_of(", \t\n") == std::string::npos,
          "an estimator name is non-empty without commas or spaces, got '{}'", f.name);
  require(f.kind != Kind::Learned && f.make && f.restore, "estimator '{}' needs make and restore to be registered",
          f.name);
  for (const auto& b : builtin_families())
    require(b.name != f.name, "'{}' is the name of a built-in estimator; choose another name", f.name);
  std::lock_guard lock(runtime().mutex);
  require(replace || !find_runtime(f.name), "an estimator called '{}' is already registered", f.name);
  runtime().all.push_back(std::move(f));
}

nlohmann::json families_json() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& f : estimator_families())
    j.push_back({{"name", f.name},
                 {"description", f.description},
                 {"kind", to_string(f.kind)},
                 {"label", f.style.label},
                 {"color", f.style.color},
                 {"marker", f.style.marker},
                 {"line", f.style.line},
                 {"complex_valued", f.complex_valued}});
  return j;
}

const Family& find_family(const std::string& name) {
  for (const auto& f : builtin_families())
    if (f.name == name) return f;
  {
    std::lock_guard lock(runtime().mutex);
    if (const Family* f = find_runtime(name)) return *f;
  }
  std::string known;
  for (const auto& f : estimator_families()) known += (known.empty() ? "" : ", ") + f.name;
  throw InvalidArgument(fmt::format("unknown estimator '{}' (known: {})", name, known));
}

const Family& find_estimator_family(const std::string& name) {
  const Family& f = find_family(name);
  require(f.kind != Kind::Learned,
          "'{}' is a learned deterministic feature map: it has zero variance and a bias, so variance commands do not "
          "apply; see `kestrel reproduce luna`",
          name);
  return f;
}

std::vector<std::string> estimator_names() {
  std::vector<std::string> names;
  for (const auto& f : estimator_families())
    if (f.kind != Kind::Learned) names.push_back(f.name);
  return names;
}

std::vector<std::string> default_study_estimators() {
  std::vector<std::string> names;
  for (const auto& f : estimator_families())
    if (f.default_study) names.push_back(f.name);
  return names;
}

std::string default_feature_estimator() {
  for (const auto& f : estimator_families())
    if (f.default_features) return f.name;
  throw InvalidArgument("no estimator family is flagged default_features");
}

bool halved_by_halve_real(const std::string& family) { return !find_family(family).complex_valued; }

std::optional<ThreePointForm> three_point_form(const Estimator& e) { return e.three_point_form(); }

std::optional<IsotropicForm> isotropic_form(const Estimator& e) { return e.isotropic_form(); }

std::unique_ptr<Estimator> make_estimator(const std::string& name, const arma::mat& X, const arma::mat& Y) {
  const Family& f = find_estimator_family(name);
  validate_sets(X, Y);
  return f.make(X, Y);
}

std::unique_ptr<Estimator> restore_estimator(const nlohmann::json& state) {
  require(state.is_object() && state.contains("family") && state["family"].is_string(),
          "an estimator state is a JSON object with the field 'family'");
  const Family& f = find_estimator_family(state["family"].get<std::string>());
  try {
    return f.restore(state);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("malformed state of a '{}' estimator: {}", f.name, e.what()));
  }
}

std::unique_ptr<FeatureMap> make_feature_map(const std::string& name, const arma::mat& X, const arma::mat& Y) {
  const Family& f = find_family(name);
  validate_sets(X, Y);
  if (f.make_map) return f.make_map(X, Y);
  return f.make(X, Y);
}

std::unique_ptr<Estimator> make_estimator_from_reference(const std::string& name, const arma::mat& Q,
                                                         const arma::mat& T) {
  const Family& f = find_estimator_family(name);
  validate_sets(Q, T);
  return f.make_from_reference ? f.make_from_reference(Q, T) : f.make(Q, T);
}

std::unique_ptr<Estimator> make_estimator_for_budget(const std::string& name, const arma::mat& X, const arma::mat& Y) {
  const Family& f = find_estimator_family(name);
  validate_sets(X, Y);
  return f.make_for_budget ? f.make_for_budget(X, Y) : f.make(X, Y);
}

arma::uword draws_for_budget(const std::string& name, arma::uword M) {
  const Family& f = find_family(name);
  require(M > 0, "feature budget M must be > 0, got 0");
  const arma::uword draws = f.draws_for_columns ? f.draws_for_columns(M) : (f.complex_valued ? M / 2 : M);
  return std::max<arma::uword>(1, draws);
}

}  // namespace kestrel
