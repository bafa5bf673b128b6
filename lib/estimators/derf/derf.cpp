// DERF validity (Thm 4.1), exact variance (eq. 9, cancellation-free form) and feature maps; see derf.hpp.
#include "estimators/derf/derf.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/logmath.hpp"
#include "core/parallel.hpp"
#include "core/vecmath.hpp"
#include "estimators/state.hpp"

namespace kestrel {

namespace {

struct SymEig {
  arma::vec a;  // eigenvalues of A (ascending)
  arma::mat V;  // A = V diag(a) V^T
};

SymEig eig_of(const arma::mat& A) {
  SymEig e;
  const arma::mat S = 0.5 * (A + A.t());
  if (!arma::eig_sym(e.a, e.V, S)) throw NumericalError("DERF: eigendecomposition of A failed");
  return e;
}

std::vector<double> to_vector(const arma::vec& v) { return arma::conv_to<std::vector<double>>::from(v); }

}  // namespace

void validate(const DerfParams& p, double tol) {
  require(std::isfinite(tol) && tol > 0, "DERF validity tolerance must be > 0, got {}", tol);
  const arma::uword d = p.A.n_rows;
  require(d > 0 && p.A.n_cols == d, "DERF A must be a nonempty square matrix, got {} x {}", p.A.n_rows, p.A.n_cols);
  const std::pair<const char*, const arma::mat*> mats[] = {
      {"A", &p.A}, {"B1", &p.B1}, {"B2", &p.B2}, {"C1", &p.C1}, {"C2", &p.C2}};
  for (const auto& [name, m] : mats) {
    require(m->n_rows == d && m->n_cols == d, "DERF {} must be {} x {}, got {} x {}", name, d, d, m->n_rows, m->n_cols);
    require(m->is_finite(), "DERF {} must be finite (found NaN or Inf)", name);
  }
  require(std::isfinite(p.log_D), "DERF log D must be finite, got {}", p.log_D);
  const double asym = arma::abs(p.A - p.A.t()).max();
  require(asym <= tol * std::max(1.0, arma::abs(p.A).max()), "DERF A must be symmetric, got max |A - A^T| = {:.3g}",
          asym);
  const SymEig e = eig_of(p.A);
  require(e.a.max() < 0.125, "DERF needs 8A < I (Thm 4.1), but the largest eigenvalue of A is {} (>= 1/8)", e.a.max());
  const arma::mat P4 = e.V * arma::diagmat(1.0 / (1.0 - 4.0 * e.a)) * e.V.t();  // (I - 4A)^-1
  const double p4_norm = arma::max(1.0 / (1.0 - 4.0 * e.a));

  const arma::mat R = p.B1.t() * P4 * p.B2 - arma::eye(d, d);
  const double dev = arma::abs(R).max();
  const double scale = std::max(1.0, arma::norm(p.B1, "fro") * p4_norm * arma::norm(p.B2, "fro"));
  require(dev <= tol * scale, "DERF needs B1^T (I-4A)^-1 B2 = I (Thm 4.1): max deviation {:.3g} exceeds {:.3g}", dev,
          tol * scale);
  const std::pair<const arma::mat*, const arma::mat*> bc[] = {{&p.B1, &p.C1}, {&p.B2, &p.C2}};
  for (int k = 0; k < 2; ++k) {
    const arma::mat& B = *bc[k].first;
    const arma::mat G = -0.5 * B.t() * P4 * B;
    const double dc = arma::abs(*bc[k].second - G).max();
    const double sc = std::max(1.0, std::pow(arma::norm(B, "fro"), 2) * p4_norm);
    require(dc <= tol * sc, "DERF needs C{} = -1/2 B{}^T (I-4A)^-1 B{} (Thm 4.1): max deviation {:.3g} exceeds {:.3g}",
            k + 1, k + 1, k + 1, dc, tol * sc);
  }
  const double log_d = 0.25 * arma::accu(arma::log1p(-4.0 * e.a));
  require(std::abs(p.log_D - log_d) <= tol * std::max(1.0, std::abs(log_d)),
          "DERF needs D = det(I-4A)^(1/4) (Thm 4.1): log D = {}, expected {}", p.log_D, log_d);
}

DerfParams derf_from_a_b1(const arma::mat& A, const arma::mat& B1) {
  require(A.n_rows > 0 && A.is_square() && B1.n_rows == A.n_rows && B1.is_square(),
          "DERF A and B1 must be d x d, got {} x {} and {} x {}", A.n_rows, A.n_cols, B1.n_rows, B1.n_cols);
  const arma::uword d = A.n_rows;
  const SymEig e = eig_of(A);
  require(e.a.max() < 0.125, "DERF needs 8A < I (Thm 4.1), but the largest eigenvalue of A is {}", e.a.max());
  DerfParams p;
  p.A = 0.5 * (A + A.t());
  p.B1 = B1;
  arma::mat B1inv_t;
  require(arma::solve(B1inv_t, B1.t(), arma::eye(d, d), arma::solve_opts::no_approx),
          "DERF B1 must be invertible (B1^T (I-4A)^-1 B2 = I)");
  p.B2 = (arma::eye(d, d) - 4.0 * p.A) * B1inv_t;
  const arma::mat P4 = e.V * arma::diagmat(1.0 / (1.0 - 4.0 * e.a)) * e.V.t();
  p.C1 = -0.5 * p.B1.t() * P4 * p.B1;
  p.C2 = -0.5 * p.B2.t() * P4 * p.B2;
  p.log_D = 0.25 * arma::accu(arma::log1p(-4.0 * e.a));
  return p;
}

DerfSecondMoment derf_second_moment(const DerfParams& p) {
  const SymEig e = eig_of(p.A);
  DerfSecondMoment f;
  f.c0 = arma::accu(arma::log1p(-4.0 * e.a) - 0.5 * arma::log1p(-8.0 * e.a));
  const arma::mat T = arma::diagmat(1.0 / arma::sqrt((1.0 - 8.0 * e.a) % (1.0 - 4.0 * e.a))) * e.V.t();
  f.TB1 = T * p.B1;
  f.TB2 = T * p.B2;
  return f;
}

DerfStats derf_stats(const arma::mat& X, const arma::mat& Y) {
  validate_sets(X, Y);
  DerfStats st;
  st.d = X.n_rows;
  st.M1 = X * X.t() / static_cast<double>(X.n_cols);
  st.M2 = Y * Y.t() / static_cast<double>(Y.n_cols);
  st.mu4 = arma::mean(X, 1);
  st.mu5 = arma::mean(Y, 1);
  return st;
}

DerfEstimator::DerfEstimator(std::string name, DerfParams p, nlohmann::json summary, double tol)
    : p_(std::move(p)), summary_(std::move(summary)) {
  validate(p_, tol);
  form_ = derf_second_moment(p_);
  info_.name = std::move(name);
  info_.complex = false;
  info_.positive = true;
  d_ = p_.dim();
  if (summary_.is_null()) {
    summary_ = {{"A_eigenvalues", to_vector(eig_of(p_.A).a)},
                {"B1_fro", arma::norm(p_.B1, "fro")},
                {"B2_fro", arma::norm(p_.B2, "fro")},
                {"log_D", p_.log_D}};
  }
}

arma::mat DerfEstimator::log_var_hook(const PairGram& g) const {
  arma::mat r = pairwise_sq_norm_sum(form_.TB1 * g.X, form_.TB2 * g.Y, 1.0);
  return simd::log_expm1(r, 1.0, form_.c0);  // -inf where c0 + s <= 0
}

// features_hook's pieces: P = B^T w, col = w^T A w + log D, row = x^T C x (B, C of the side).
std::optional<FeatureMap::Exponent> DerfEstimator::exponent_hook(const Draw* w, const arma::mat* X, Side side) const {
  Exponent e;
  if (w) {
    const arma::mat& B = side == Side::Query ? p_.B1 : p_.B2;
    e.form.col = arma::sum((p_.A * w->omega) % w->omega, 0);
    e.form.col += p_.log_D;
    e.form.P = B.t() * w->omega;
  }
  if (X) {
    const arma::mat& C = side == Side::Query ? p_.C1 : p_.C2;
    e.points = {*X, arma::sum((C * *X) % *X, 0).t()};
  }
  return e;
}

arma::mat DerfEstimator::features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                                       bool log) const {
  const arma::mat& B = side == Side::Query ? p_.B1 : p_.B2;
  const arma::mat& C = side == Side::Query ? p_.C1 : p_.C2;
  arma::mat F = X.t() * (B.t() * w.omega);                   // w^T B x: O(M d^2 + L M d)
  F.each_row() += arma::sum((p_.A * w.omega) % w.omega, 0);  // w^T A w: O(M d^2)
  F.each_col() += arma::sum((C * X) % X, 0).t();             // x^T C x: O(L d^2)
  F += p_.log_D;
  return from_exponent(std::move(F), log_row_scale, log);
}

nlohmann::json DerfEstimator::state() const {
  return {{"family", info_.name},   {"A", state::of(p_.A)},   {"B1", state::of(p_.B1)}, {"B2", state::of(p_.B2)},
          {"C1", state::of(p_.C1)}, {"C2", state::of(p_.C2)}, {"log_D", p_.log_D},      {"summary", summary_}};
}

std::unique_ptr<Estimator> restore_derf(const nlohmann::json& j) {
  DerfParams p{.A = state::mat(j, "A"),
               .B1 = state::mat(j, "B1"),
               .B2 = state::mat(j, "B2"),
               .C1 = state::mat(j, "C1"),
               .C2 = state::mat(j, "C2"),
               .log_D = state::num(j, "log_D")};
  return std::make_unique<DerfEstimator>(j["family"].get<std::string>(), std::move(p),
                                         j.value("summary", nlohmann::json()));
}

nlohmann::json DerfEstimator::params() const {
  nlohmann::json j = summary_;
  j["family"] = info_.name;
  return j;
}

}  // namespace kestrel
