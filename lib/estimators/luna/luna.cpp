// LUNA learned feature maps: initialisation, evaluation, JSON round trip and the Estimator adapter
// (LUNA section 3.2 eq. 11, section 5.4 variants; see luna.hpp).
#include "estimators/luna/luna.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/rng.hpp"
#include "estimators/luna/model.hpp"

namespace kestrel {

LunaParams luna_init(LunaVariant variant, arma::uword d, arma::uword M, const LunaInitOptions& opt) {
  const arma::uword C = variant == LunaVariant::FixedRff ? 2 : opt.channels;
  require(d > 0, "LUNA map: dimension d must be > 0, got 0");
  require(C >= 2, "LUNA map: number of channels must be >= 2, got {}", C);
  require(M > 0 && M % C == 0, "LUNA map: M = {} features must be a positive multiple of the {} channels", M, C);
  require(std::isfinite(opt.target_alpha), "LUNA map: target alpha must be finite, got {}", opt.target_alpha);
  LunaParams p;
  p.variant = variant;
  p.target_alpha = opt.target_alpha;
  Rng rng(opt.seed, Stream::Fit, 0);
  p.W = rng.normal_matrix(M / C, d);
  p.b.zeros(M / C);
  p.u.ones(C);
  p.v = arma::regspace(0, C - 1) * (arma::datum::pi / C);
  if (variant == LunaVariant::FixedRff) p.v = {arma::datum::pi / 2, 0.0};  // cos z = sin(z + pi/2), sin z
  // sum_c sin(a + v_c) sin(b + v_c) = (C/2) cos(a - b) for C >= 2 phases evenly spaced over [0, pi).
  p.A = arma::eye(C, C) * std::sqrt(2.0 / C);
  if (variant == LunaVariant::FixedRff) p.A = arma::eye(2, 2);
  p.gate_w.zeros(d);
  p.gate_gamma = 0;
  return p;
}

void validate(const LunaParams& p) {
  require(p.P() > 0 && p.d() > 0 && p.C() > 0 && p.h() > 0,
          "LUNA map: empty parameters (P = {}, d = {}, C = {}, h = {})", p.P(), p.d(), p.C(), p.h());
  require(p.b.n_elem == p.P(), "LUNA map: b has {} entries, P = {}", p.b.n_elem, p.P());
  require(p.u.n_elem == p.h() && p.v.n_elem == p.h(), "LUNA map: bank has {} and {} entries, h = {}", p.u.n_elem,
          p.v.n_elem, p.h());
  require(p.gate_w.n_elem == p.d(), "LUNA map: gate_w has {} entries, d = {}", p.gate_w.n_elem, p.d());
  const bool finite = p.W.is_finite() && p.b.is_finite() && p.u.is_finite() && p.v.is_finite() && p.A.is_finite() &&
                      p.gate_w.is_finite() && std::isfinite(p.gate_gamma) && std::isfinite(p.target_alpha);
  require(finite, "LUNA map: parameters must be finite");
}

arma::mat luna_features(const LunaParams& p, const arma::mat& X) {
  validate(p);
  validate_points(X, "LUNA input");
  require(X.n_rows == p.d(), "LUNA map: points have dimension {}, the map was built for {}", X.n_rows, p.d());
  const arma::mat Wt = p.W.t();  // column p of Wt is w_p: row-major P x d storage
  const arma::mat At = p.A.t();
  const luna_detail::MapRef<double> r{
      Wt.memptr(),   p.b.memptr(), p.u.memptr(), p.v.memptr(), At.memptr(), p.gate_w.memptr(),
      &p.gate_gamma, p.P(),        p.d(),        p.C(),        p.h(),       p.variant == LunaVariant::Gated};
  arma::mat Ft(p.M(), X.n_cols);
  std::vector<double> hidden(p.h());
  for (arma::uword i = 0; i < X.n_cols; ++i) luna_detail::phi_point(r, X.colptr(i), Ft.colptr(i), hidden.data());
  if (!Ft.is_finite()) throw NumericalError("LUNA map: non-finite feature (envelope overflow?)");
  return Ft.t();
}

double luna_relative_mse(const LunaParams& p, const arma::mat& X, const arma::mat& Y) {
  validate_sets(X, Y);
  const arma::mat est = luna_features(p, X) * luna_features(p, Y).t();
  const arma::mat lk = log_kernel(Kernel{p.target_alpha}, X, Y);
  // (est - K) / K = est e^-logK - 1, without forming K (which may under- or overflow).
  const arma::mat rel = est % arma::exp(-lk) - 1.0;
  const double mse = arma::mean(arma::vectorise(arma::square(rel)));
  if (!std::isfinite(mse)) throw NumericalError("LUNA relative MSE is not finite (kernel values beyond double range)");
  return mse;
}

namespace {
nlohmann::json mat_json(const arma::mat& m) {
  nlohmann::json rows = nlohmann::json::array();
  for (arma::uword i = 0; i < m.n_rows; ++i) rows.push_back(arma::conv_to<std::vector<double>>::from(m.row(i)));
  return rows;
}
arma::mat json_mat(const nlohmann::json& j, arma::uword cols, const char* name) {
  require(j.is_array(), "LUNA JSON: {} must be an array of rows", name);
  arma::mat m(j.size(), cols);
  for (arma::uword i = 0; i < j.size(); ++i) {
    const auto row = j[i].get<std::vector<double>>();
    require(row.size() == cols, "LUNA JSON: row {} of {} has {} entries, expected {}", i, name, row.size(), cols);
    for (arma::uword k = 0; k < cols; ++k) m(i, k) = row[k];
  }
  return m;
}
}  // namespace

nlohmann::json to_json(const LunaParams& p) {
  return {{"family", "luna"},
          {"variant", to_string(p.variant)},
          {"target_alpha", p.target_alpha},
          {"P", p.P()},
          {"C", p.C()},
          {"h", p.h()},
          {"d", p.d()},
          {"M", p.M()},
          {"W", mat_json(p.W)},
          {"b", arma::conv_to<std::vector<double>>::from(p.b)},
          {"bank_u", arma::conv_to<std::vector<double>>::from(p.u)},
          {"bank_v", arma::conv_to<std::vector<double>>::from(p.v)},
          {"coef", mat_json(p.A)},
          {"gate_w", arma::conv_to<std::vector<double>>::from(p.gate_w)},
          {"gate_gamma", p.gate_gamma}};
}

LunaParams luna_params_from_json(const nlohmann::json& j) {
  try {
    LunaParams p;
    p.variant = parse_luna_variant(j.at("variant").get<std::string>());
    p.target_alpha = j.at("target_alpha").get<double>();
    const auto d = j.at("d").get<arma::uword>(), h = j.at("h").get<arma::uword>();
    p.W = json_mat(j.at("W"), d, "W");
    p.b = arma::vec(j.at("b").get<std::vector<double>>());
    p.u = arma::vec(j.at("bank_u").get<std::vector<double>>());
    p.v = arma::vec(j.at("bank_v").get<std::vector<double>>());
    p.A = json_mat(j.at("coef"), h, "coef");
    p.gate_w = arma::vec(j.at("gate_w").get<std::vector<double>>());
    p.gate_gamma = j.at("gate_gamma").get<double>();
    validate(p);
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("LUNA JSON: {}", e.what()));
  }
}

LunaMap::LunaMap(LunaParams p) : p_(std::move(p)) {
  validate(p_);
  info_ = {"luna-" + to_string(p_.variant), false, false};
  d_ = p_.d();
  fixed_features_ = p_.M();
}

Draw LunaMap::draw_hook(arma::uword, Rng&, Sampler) const { return Draw{arma::mat(p_.d(), 0), {}}; }

std::unique_ptr<FeatureMap> make_luna_initial(LunaVariant v, arma::uword d) {
  return std::make_unique<LunaMap>(luna_init(v, d, kLunaInitialFeatures));
}

arma::mat LunaMap::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale, bool) const {
  require(w.count() == 0, "estimator '{}' is deterministic: pass the empty Draw of draw(M), got {} random objects",
          info_.name, w.count());
  arma::mat F = luna_features(p_, X);
  arma::vec row = -p_.target_alpha * arma::sum(arma::square(X), 0).t();
  if (!log_row_scale.is_empty()) row += log_row_scale;
  if (arma::any(row != 0.0)) {
    const arma::vec scale = arma::exp(row);
    if (!scale.is_finite())
      throw NumericalError(
          fmt::format("estimator '{}': softmax-kernel features overflow (row factor exp({:g})); use "
                      "luna_features for the K^(alpha) features directly",
                      info_.name, row.max()));
    F.each_col() %= scale;
  }
  return F;
}

}  // namespace kestrel
