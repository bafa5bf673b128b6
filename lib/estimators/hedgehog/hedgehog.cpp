// Hedgehog's learned feature map phi(x) = [exp(W x + b), exp(-(W x + b))] (Hedgehog section 4.1; see hedgehog.hpp):
// initialisation, log-features, JSON round trip and the FeatureMap adapter.
#include "estimators/hedgehog/hedgehog.hpp"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

namespace {
void require_features(arma::uword M) {
  require(M > 0 && M % 2 == 0, "Hedgehog map: M = {} features must be even and > 0 (M = 2P)", M);
}

// Rows [from, to) of W drawn as hedgehog_init draws them: row p from its own stream.
void draw_rows(arma::mat& W, arma::uword from, arma::uword to, std::uint64_t seed) {
  for (arma::uword p = from; p < to; ++p) {
    Rng rng(seed, Stream::Fit, p);
    for (arma::uword j = 0; j < W.n_cols; ++j) W(p, j) = rng.normal();
  }
}
}  // namespace

HedgehogParams hedgehog_init(arma::uword d, arma::uword M, std::uint64_t seed) {
  require(d > 0, "Hedgehog map: dimension d must be > 0, got 0");
  require_features(M);
  HedgehogParams p{arma::mat(M / 2, d), arma::vec(M / 2, arma::fill::zeros)};
  draw_rows(p.W, 0, M / 2, seed);
  return p;
}

HedgehogParams hedgehog_extend(const HedgehogParams& p, arma::uword M, std::uint64_t seed) {
  validate(p);
  require_features(M);
  require(M >= p.M(), "Hedgehog warm start: M = {} is below the fitted map's {}", M, p.M());
  HedgehogParams out{arma::mat(M / 2, p.d()), arma::vec(M / 2, arma::fill::zeros)};
  out.W.rows(0, p.P() - 1) = p.W;
  out.b.subvec(0, p.P() - 1) = p.b;
  draw_rows(out.W, p.P(), M / 2, seed);
  return out;
}

void validate(const HedgehogParams& p) {
  require(p.P() > 0 && p.d() > 0, "Hedgehog map: empty parameters (P = {}, d = {})", p.P(), p.d());
  require(p.b.n_elem == p.P(), "Hedgehog map: b has {} entries, P = {}", p.b.n_elem, p.P());
  require(p.W.is_finite() && p.b.is_finite(), "Hedgehog map: parameters must be finite");
}

arma::mat hedgehog_log_features(const HedgehogParams& p, const arma::mat& X) {
  validate(p);
  validate_points(X, "Hedgehog input");
  require(X.n_rows == p.d(), "Hedgehog map: points have dimension {}, the map was built for {}", X.n_rows, p.d());
  arma::mat Z = X.t() * p.W.t();  // L x P
  Z.each_row() += p.b.t();
  return arma::join_rows(Z, -Z);
}

std::vector<NamedArray> named_parameters(const HedgehogParams& p) {
  const arma::mat Wt = p.W.t();  // column-major storage of W^T is W row-major
  return {{"W", {p.P(), p.d()}, std::vector<double>(Wt.begin(), Wt.end())},
          {"b", {p.P()}, std::vector<double>(p.b.begin(), p.b.end())}};
}

nlohmann::json to_json(const HedgehogParams& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (arma::uword i = 0; i < p.P(); ++i) rows.push_back(arma::conv_to<std::vector<double>>::from(p.W.row(i)));
  return {{"family", "hedgehog"}, {"P", p.P()}, {"d", p.d()},
          {"M", p.M()},           {"W", rows},  {"b", arma::conv_to<std::vector<double>>::from(p.b)}};
}

HedgehogParams hedgehog_params_from_json(const nlohmann::json& j) {
  try {
    const auto P = j.at("P").get<arma::uword>(), d = j.at("d").get<arma::uword>();
    const auto& rows = j.at("W");
    require(rows.is_array() && rows.size() == P, "Hedgehog JSON: W must be an array of P = {} rows", P);
    HedgehogParams p{arma::mat(P, d), arma::vec(j.at("b").get<std::vector<double>>())};
    for (arma::uword i = 0; i < P; ++i) {
      const auto row = rows[i].get<std::vector<double>>();
      require(row.size() == d, "Hedgehog JSON: row {} of W has {} entries, d = {}", i, row.size(), d);
      for (arma::uword k = 0; k < d; ++k) p.W(i, k) = row[k];
    }
    validate(p);
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("Hedgehog JSON: {}", e.what()));
  }
}

HedgehogMap::HedgehogMap(HedgehogParams p) : p_(std::move(p)) {
  validate(p_);
  info_ = {"hedgehog", false, true, false};
  d_ = p_.d();
  fixed_features_ = p_.M();
}

Draw HedgehogMap::draw_hook(arma::uword, Rng&, Sampler) const { return Draw{arma::mat(p_.d(), 0), {}}; }

arma::mat HedgehogMap::features_hook(const Draw& w, const arma::mat& X, Side, const arma::vec& log_row_scale,
                                     bool log) const {
  require(w.count() == 0, "estimator '{}' is deterministic: pass the empty Draw of draw(M), got {} random objects",
          info_.name, w.count());
  return from_exponent(hedgehog_log_features(p_, X), log_row_scale, log);
}

}  // namespace kestrel
