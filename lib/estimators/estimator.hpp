// The estimator interface every random-feature family implements. An Estimator is a family with its
// parameters already fitted: it gives the exact single-feature variance and draws feature maps.
// Conventions (README): points are columns of d x L matrices; the base kernel is the softmax kernel
// K^(0)(x,y) = exp(x^T y); other scaled softmax kernels K^(alpha) follow by the deterministic factor
// exp(alpha |x|^2) on each side (DERF section 2.3), applied in one place (feature_map, log_variance).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "core/rng.hpp"
#include "estimators/isotropic.hpp"
#include "estimators/three_point.hpp"
#include "kernels/kernel.hpp"
#include "sampling/omega.hpp"

namespace kestrel {

enum class Side { Query, Key };  // f^(1) applied to x (queries), f^(2) to y (keys)

// One realisation of M random objects omega_1..omega_M. Each field has one meaning; a family fills those it draws.
struct Draw {
  arma::mat omega;     // d x M: Gaussian projections (empty for the discrete families)
  arma::rowvec phase;  // 1 x M: uniform phases (TrigRF cos form); empty otherwise
  arma::mat counts;    // d x M: per-coordinate counts (the discrete families PoisRF, GeomRF); empty otherwise
  // The hybrids (HRF): omega holds the M projections of the positive part, these the rest.
  arma::mat omega_trig;  // d x M: projections of the trigonometric part; empty when shared with omega
  arma::mat tau;         // d x n: projections of the lambda features; empty for every other family
  // M: the columns of the counts of a discrete draw, else of omega.
  arma::uword count() const { return counts.is_empty() ? omega.n_cols : counts.n_cols; }
  // d: the rows of the counts of a discrete draw, else of omega.
  arma::uword dim() const { return counts.is_empty() ? omega.n_rows : counts.n_rows; }
  // Columns [a, b) of a draw of M objects (omega, phase, counts), as a draw of their own; a hybrid's draw has no
  // columns of its own (its features pair every base feature with every lambda feature) and is refused.
  Draw columns(arma::uword a, arma::uword b) const;
  bool operator==(const Draw& o) const;  // bit for bit, every field
};

// The features of a map whose log is affine in the point after one projection (GERF with real A, DERF, DARK,
// antithetic and hyperbolic PosRF; PoisRF+ and GeomRF+ in the log of the shifted point):
// log f(w_m, x_i) = (Z^T P)_im + col_m + row_i, with P and col of the draw (ExponentForm) and Z, row of the points
// (ExponentPoints), neither depending on the other. Callers use it to tile and choose the precision of the projection
// themselves (analysis/nested_attention.hpp's long-context path). The form is of f itself (raw_features): features()
// adds the -log(M)/2 of its 1/sqrt(M).
// Block-sparse maps (the clustered HRF: a point has features only in the blocks of its cluster) also give each column
// the group of points it belongs to: a point of another group (ExponentPoints::group) has feature 0 there (log -inf).
struct ExponentForm {
  arma::mat P;       // d' x F: one column per feature column (d' = the rows of ExponentPoints::Z)
  arma::rowvec col;  // 1 x F
  arma::uvec group;  // F, or empty: every column belongs to every point
};
// The points' part of the same form.
struct ExponentPoints {
  arma::mat Z;       // d' x L: the exponent points (X itself but for PoisRF+, GeomRF+ and the clustered HRF)
  arma::vec row;     // L
  arma::uvec group;  // L, or empty: each point's group, for a form with groups
};

struct EstimatorInfo {
  std::string name;         // short CLI name, e.g. "oprf"
  bool complex = false;     // a feature is Re(f1 f2) of complex f's: two real columns per omega
  bool positive = false;    // every feature value is > 0, or 0 by structure (log_features gives -inf there)
  bool projections = true;  // draws are Gaussian projections, so the sampler (orthogonal, simplex, ...) applies
  // Feature blocks per drawn object, before complex's two real columns: 2 for the hyperbolic pair [e^{w x}, e^{-w x}],
  // n_q n_k for the clustered HRF; 0 where the columns are not linear in the draws (hybrids pair draws: ~M^2).
  arma::uword blocks_per_draw = 1;
};

// A fitted feature map f^(1), f^(2): draws and features, nothing about variance (learned maps stop here).
// The public methods validate their input once and call the protected hooks a family implements.
class FeatureMap {
 public:
  virtual ~FeatureMap() = default;
  const EstimatorInfo& info() const { return info_; }
  arma::uword dim() const { return d_; }
  // > 0: a learned map with this many features, and draw(M) takes exactly that M. 0: any M > 0.
  arma::uword fixed_features() const { return fixed_features_; }
  // The real feature columns of one drawn object (features() of a draw of M has M times this many; the contract suite
  // checks it), or 0 where they are not linear in the draws. advise counts M in these columns, the width of the
  // linear-attention product.
  arma::uword columns_per_draw() const { return info_.blocks_per_draw * (info_.complex ? 2 : 1); }

  // Draws M random objects (M > 0).
  Draw draw(arma::uword M, Rng& rng, Sampler sampler) const;
  // A nested draw of M: for every M' <= M its first M' columns are distributed as draw(M'), so one draw gives the
  // estimate at every M' (analysis/nested_attention.hpp). Undefined for families whose draws cannot nest (hybrids).
  Draw draw_nested(arma::uword M, Rng& rng, Sampler sampler) const;

  // Softmax-kernel features f^(side)(w_m, x_i) / sqrt(M): L x M for real features; for complex
  // ones L x 2M holding [Re f, Im f] (Query) and [Re f, -Im f] (Key), so that P S^T = Re sum f1 f2 / M.
  // Row i is also multiplied by exp(log_row_scale(i)) if given (one per point), the scale added inside the
  // exponent, so that e^+800 * e^-800 (the Gaussian kernel's exp(-|x|^2/2) at large sigma) stays 1.
  // The 1/sqrt(M) is applied here, once for every family, as -log(M)/2 added to each row's log scale (a deterministic
  // map, whose draw has no random objects, has no average to take).
  arma::mat features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale = {}) const;

  // log of features() for positive maps (same layout and scale), so that callers can subtract a scale
  // before exponentiating (the attention stabiliser, lib/tasks/attention.hpp). InvalidArgument otherwise.
  arma::mat log_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale = {}) const;

  // The same without the 1/sqrt(M): f^(side)(w_m, x_i) itself (times the row scale), and its log. The nested
  // simulation takes the first columns of a draw at the whole draw's scale (analysis/nested_attention.hpp).
  arma::mat raw_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale = {}) const;
  arma::mat raw_log_features(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale = {}) const;

  // The exponent form of raw_log_features (ExponentForm above), or nullopt for maps without one; exponent_points is
  // its per-point part, asked only of maps with a form (Undefined otherwise). exp(Z^T P + col + row) equals
  // raw_features() up to rounding (tested for every family in tests/contract_test.cpp).
  std::optional<ExponentForm> exponent_form(const Draw& w, Side side) const;
  ExponentPoints exponent_points(const arma::mat& X, Side side) const;

  // Fitted parameters, for output files.
  virtual nlohmann::json params() const = 0;

 protected:
  // Draw hook; the default draws Gaussian projections with the given sampler.
  virtual Draw draw_hook(arma::uword M, Rng& rng, Sampler sampler) const;
  // Nested-draw hook; the default is draw_hook, which nests: the Gaussian samplers fill blocks of d in order and keep
  // the first columns of the last block (sampling/omega.hpp), and discrete counts are iid.
  virtual Draw nested_draw_hook(arma::uword M, Rng& rng, Sampler sampler) const;
  // The one feature hook, called with valid finite points of dimension dim() and log_row_scale empty or one
  // per point: the features f (without 1/sqrt(M), which the row scale carries) with the row scale applied, or their
  // logs when `log` (asked of positive maps only).
  // Families whose features are exp(E) return from_exponent(E, ...); others apply_row_scale(F, ...).
  virtual arma::mat features_hook(const Draw& w, const arma::mat& X, Side side, const arma::vec& log_row_scale,
                                  bool log) const = 0;
  // The one exponent-form hook: nullopt for maps without a form (the default); otherwise the draw's part when w is
  // given and the points' part when X is (each may be null; the other part is then left empty). The form is of f
  // itself, without 1/sqrt(M), as features_hook.
  struct Exponent {
    ExponentForm form;
    ExponentPoints points;
  };
  virtual std::optional<Exponent> exponent_hook(const Draw* w, const arma::mat* X, Side side) const;
  // exp(E + scale), or E + scale when log.
  static arma::mat from_exponent(arma::mat E, const arma::vec& log_row_scale, bool log);
  // F with rows times exp(scale) (through the log for positive maps whose exp(scale) leaves the normal range, so
  // that huge * tiny stays finite), or log F.
  arma::mat apply_row_scale(arma::mat F, const arma::vec& log_row_scale, bool log) const;

  EstimatorInfo info_;              // set by the family's constructor
  arma::uword d_ = 0;               // likewise
  arma::uword fixed_features_ = 0;  // likewise, for learned maps
};

// A random-feature estimator: a feature map whose single-feature variance is known exactly.
class Estimator : public FeatureMap {
 public:
  // Everything needed to rebuild this estimator exactly: {"family": registry name, fitted parameters}, numbers that
  // survive JSON bit for bit (estimators/state.hpp). restore_estimator (registry.hpp) rebuilds it; Python pickles with
  // it. The contract suite checks the round trip for every family.
  virtual nlohmann::json state() const = 0;
  // log(Var[f1(w,x_i) f2(w,y_j)] / K(x_i,y_j)^2) for one feature (M = 1), all pairs: Lx x Ly.
  // This ratio does not depend on alpha. -inf where the estimator is exact.
  arma::mat log_var_over_k2(const arma::mat& X, const arma::mat& Y) const;
  // log(Var/K^2) of the estimate built from M features (M > 0).
  arma::mat log_var_over_k2_m(const arma::mat& X, const arma::mat& Y, arma::uword M) const;
  // The same for the sets of a PairGram, which keeps the Gram product the family forms (if any) for the caller's own
  // use, e.g. log_kernel(k, g): one BLAS product for both (the pairwise variance's tiles).
  arma::mat log_var_over_k2_m(const PairGram& g, arma::uword M) const;
  // The exact-variance forms of this fitted estimator, where its family has them: the three-point form
  // (three_point.hpp; the exact variance of K-hat C, analysis/operator_variance.hpp) and the isotropic form
  // (isotropic.hpp; the exact variance with orthogonal and simplex projections, analysis/coupled_variance.hpp).
  // Nothing for families without one (discrete, hybrid, learned, Python-written): their variances are simulated.
  std::optional<ThreePointForm> three_point_form() const { return three_point_form_hook(); }
  std::optional<IsotropicForm> isotropic_form() const { return isotropic_form_hook(); }

 protected:
  // Called with a valid pair of sets g.X, g.Y of dimension dim(). Families whose variance is a function of x^T y and
  // the norms (GERF, TrigRF) call pairwise_sq_norm_sum(g, s), so that the product is shared; others use g.X, g.Y.
  virtual arma::mat log_var_hook(const PairGram& g) const = 0;
  // The default, log_var_hook - log M, holds for averages of M iid features; estimators that are not such
  // averages (hybrids) override it.
  virtual arma::mat log_var_m_hook(const PairGram& g, arma::uword M) const;
  // A family with a closed form returns it from its fitted parameters (its own folder); the default has none.
  virtual std::optional<ThreePointForm> three_point_form_hook() const { return std::nullopt; }
  virtual std::optional<IsotropicForm> isotropic_form_hook() const { return std::nullopt; }
};

// Features for K^(alpha): rows scaled by exp(alpha |x_i|^2).
arma::mat feature_map(const FeatureMap& e, const Draw& w, const arma::mat& X, Side side, const Kernel& k);

// Unbiased estimate of K^(alpha)(X, Y) from one draw: P S^T (Lx x Ly), O(Lx Ly M).
arma::mat approximate_kernel(const FeatureMap& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                             const Kernel& k);

// Unbiased estimate of K^(alpha)(X, Y) C as P (S^T C) in O((Lx + Ly) M n), never forming Lx x Ly.
arma::mat approximate_kernel_times(const FeatureMap& e, const Draw& w, const arma::mat& X, const arma::mat& Y,
                                   const arma::mat& C, const Kernel& k);

// log Var of the M-feature estimate of K^(alpha), all pairs: log(Var/K^2) + 2 log K.
arma::mat log_variance(const Estimator& e, const Kernel& k, const arma::mat& X, const arma::mat& Y, arma::uword M = 1);

// Checks X, Y are valid point sets of the estimator's dimension.
void validate_pair(const arma::mat& X, const arma::mat& Y, arma::uword d);

}  // namespace kestrel
