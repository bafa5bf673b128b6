// Fitting Hedgehog maps to softmax attention rows (Hedgehog section 4.1, eq. 4; see fit.hpp): the cross-entropy,
// its reverse-mode gradient by hand, and Ceres' L-BFGS.
#include "estimators/hedgehog/fit.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ceres/gradient_problem.h>
#include <ceres/gradient_problem_solver.h>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/kernel.hpp"

namespace kestrel {

namespace {

// Sets row r's entries after column last[r0 + r] to value (a causal mask); nothing when last is empty.
void mask_after(arma::mat& X, const arma::uvec& last, arma::uword r0, double value) {
  if (last.is_empty()) return;
  for (arma::uword r = 0; r < X.n_rows; ++r)
    if (last[r0 + r] + 1 < X.n_cols) X(r, arma::span(last[r0 + r] + 1, X.n_cols - 1)).fill(value);
}

}  // namespace

AttentionRows attention_rows(const arma::mat& Q, const arma::mat& K, const arma::uvec& rows, bool causal) {
  validate_points(Q, "queries");
  validate_points(K, "keys");
  require(Q.n_rows == K.n_rows, "queries and keys must have the same dimension, got {} and {}", Q.n_rows, K.n_rows);
  require(rows.is_empty() || rows.max() < Q.n_cols, "attention rows: row {} is beyond the {} queries",
          rows.is_empty() ? 0 : rows.max(), Q.n_cols);
  require(!causal || Q.n_cols == K.n_cols, "causal attention rows: {} queries but {} keys (one key per position)",
          Q.n_cols, K.n_cols);
  const double s = std::pow(static_cast<double>(Q.n_rows), -0.25);
  AttentionRows out{rows.is_empty() ? arma::mat(s * Q) : arma::mat(s * Q.cols(rows)), s * K, {}, {}};
  if (causal) out.last_key = rows.is_empty() ? arma::regspace<arma::uvec>(0, Q.n_cols - 1) : rows;
  arma::mat Z = out.Q.t() * out.K;  // logits q^T k / sqrt(d)
  mask_after(Z, out.last_key, 0, -arma::datum::inf);
  Z.each_col() -= arma::max(Z, 1);
  Z = arma::exp(Z);
  Z.each_col() /= arma::sum(Z, 1);
  out.A = std::move(Z);
  return out;
}

namespace {

// log phi of already scaled, already validated points: L x 2P.
arma::mat log_features(const HedgehogParams& p, const arma::mat& X) {
  arma::mat Z = X.t() * p.W.t();
  Z.each_row() += p.b.t();
  return arma::join_rows(Z, -Z);
}

// exp(F - its row maxima), in place; returns the maxima.
arma::vec exp_shifted(arma::mat& F) {
  const arma::vec m = arma::max(F, 1);
  F.each_col() -= m;
  F = arma::exp(F);
  return m;
}

// Adds dL/dW and dL/db from dL/d(log-features) dl (L x 2P) of the points X (d x L): z = W x + b enters the log-features
// as +z and -z.
void add_projection_gradient(const arma::mat& dl, const arma::mat& X, HedgehogParams& g) {
  const arma::uword P = g.P();
  const arma::mat dz = dl.cols(0, P - 1) - dl.cols(P, 2 * P - 1);  // L x P
  g.W += dz.t() * X.t();
  g.b += arma::sum(dz, 0).t();
}

// Query rows per block of the objective: blocks run in parallel and are summed in block order (deterministic for any
// thread count), and a block's Lk-wide matrices stay below 32 MiB at Lk = 16384, inside the heap that
// keep_freed_memory keeps (larger ones are mapped and faulted in anew at every evaluation).
constexpr arma::uword kRowBlock = 256;

// One block's part: its rows' sum of -sum_j A_ij log A-hat_ij and, with the gradient, the query side's dL/dW, dL/db
// and R^T Pq (Lk x 2P), the key side's factor before the elementwise product with Pk.
struct BlockPart {
  double loss = 0;
  HedgehogParams grad;
  arma::mat key_factor;
};

BlockPart block_part(const HedgehogParams& p, const AttentionRows& s, const arma::mat& Pk, const arma::vec& mk,
                     arma::uword i0, arma::uword i1, double N, bool gradient) {
  const arma::mat Q = s.Q.cols(i0, i1);
  arma::mat Pq = log_features(p, Q);
  exp_shifted(Pq);                  // the query row's max cancels in A-hat
  const arma::mat T = Pq * Pk.t();  // S_ij / exp(m_i + m_j), >= exp(-2 min(m_i, m_j)) (fit.hpp)
  arma::mat log_ahat = arma::log(T);
  log_ahat.each_row() += mk.t();
  mask_after(log_ahat, s.last_key, i0, -arma::datum::inf);  // causal: A-hat_ij = 0 beyond the row's last key
  arma::mat ahat = log_ahat;
  const arma::vec mx = exp_shifted(ahat);
  const arma::vec sums = arma::sum(ahat, 1);
  log_ahat.each_col() -= mx + arma::log(sums);
  mask_after(log_ahat, s.last_key, i0, 0.0);  // A_ij = 0 there: no term (0 log 0)
  BlockPart out{-arma::accu(s.A.rows(i0, i1) % log_ahat), {}, {}};
  if (!gradient) return out;
  // dL/dlog S_ij = (A-hat_ij - A_ij) / N (the rows of A and A-hat sum to 1); dlog S_ij / dlog phi_m(q_i) =
  // phi_m(q_i) phi_m(k_j) / S_ij = Pq_im Pk_jm / T_ij, and the same for dlog phi_m(k_j).
  ahat.each_col() /= sums;
  const arma::mat R = (ahat - s.A.rows(i0, i1)) / (N * T);
  out.grad = {arma::mat(p.P(), p.d(), arma::fill::zeros), arma::vec(p.P(), arma::fill::zeros)};
  add_projection_gradient(Pq % (R * Pk), Q, out.grad);
  out.key_factor = R.t() * Pq;
  return out;
}

// One sequence's sum over its rows of -sum_j A_ij log A-hat_ij; with grad, adds 1/N of its gradient.
double sequence_loss(const HedgehogParams& p, const AttentionRows& s, double N, HedgehogParams* grad) {
  arma::mat Pk = log_features(p, s.K);
  const arma::vec mk = exp_shifted(Pk);
  const arma::uword n = s.Q.n_cols, blocks = (n + kRowBlock - 1) / kRowBlock;
  std::vector<BlockPart> parts(blocks);
  for_each_block(blocks, [&](std::size_t b) {
    parts[b] = block_part(p, s, Pk, mk, b * kRowBlock, std::min((b + 1) * kRowBlock, n) - 1, N, grad != nullptr);
  });
  double loss = 0;
  arma::mat key_factor(Pk.n_rows, Pk.n_cols, arma::fill::zeros);
  for (const BlockPart& part : parts) {
    loss += part.loss;
    if (!grad) continue;
    grad->W += part.grad.W, grad->b += part.grad.b;
    key_factor += part.key_factor;
  }
  if (grad) add_projection_gradient(Pk % key_factor, s.K, *grad);
  return loss;
}

void validate_data(const HedgehogParams& p, const std::vector<AttentionRows>& data) {
  validate(p);
  require(!data.empty(), "Hedgehog fit: no training sequences");
  for (std::size_t s = 0; s < data.size(); ++s) {
    const AttentionRows& r = data[s];
    require(r.Q.n_cols > 0 && r.K.n_cols > 0, "Hedgehog fit: sequence {} has {} rows and {} keys", s, r.Q.n_cols,
            r.K.n_cols);
    require(r.Q.n_rows == p.d() && r.K.n_rows == p.d(), "Hedgehog fit: sequence {} has dimension {}, the map {}", s,
            r.Q.n_rows, p.d());
    require(r.A.n_rows == r.Q.n_cols && r.A.n_cols == r.K.n_cols,
            "Hedgehog fit: sequence {}: attention rows are {} x {}, expected {} x {}", s, r.A.n_rows, r.A.n_cols,
            r.Q.n_cols, r.K.n_cols);
    require(r.last_key.is_empty() || (r.last_key.n_elem == r.Q.n_cols && r.last_key.max() < r.K.n_cols),
            "Hedgehog fit: sequence {}: {} causal limits for {} rows of {} keys", s, r.last_key.n_elem, r.Q.n_cols,
            r.K.n_cols);
  }
}

double cross_entropy(const HedgehogParams& p, const std::vector<AttentionRows>& data, HedgehogParams* grad) {
  double N = 0, loss = 0;
  for (const auto& s : data) N += static_cast<double>(s.Q.n_cols);
  if (grad) *grad = {arma::mat(p.P(), p.d(), arma::fill::zeros), arma::vec(p.P(), arma::fill::zeros)};
  for (const auto& s : data) loss += sequence_loss(p, s, N, grad);
  return loss / N;
}

}  // namespace

double attention_cross_entropy(const HedgehogParams& p, const std::vector<AttentionRows>& data,
                               HedgehogParams* gradient) {
  validate_data(p, data);
  return cross_entropy(p, data, gradient);
}

namespace {

// theta = [W row-major, b], P (d + 1) numbers.
HedgehogParams unpack(const double* theta, arma::uword P, arma::uword d) {
  return {arma::mat(theta, d, P).t(), arma::vec(theta + P * d, P)};
}
arma::vec pack(const HedgehogParams& p) { return arma::join_cols(arma::vectorise(p.W.t()), p.b); }

class CeresObjective final : public ceres::FirstOrderFunction {
 public:
  CeresObjective(const std::vector<AttentionRows>& data, arma::uword P, arma::uword d) : data_(data), P_(P), d_(d) {}
  bool Evaluate(const double* x, double* cost, double* gradient) const override {
    const HedgehogParams p = unpack(x, P_, d_);
    ++evaluations;
    if (!gradient) {
      *cost = cross_entropy(p, data_, nullptr);
      return std::isfinite(*cost);  // a non-finite value makes the line search step back
    }
    HedgehogParams g;
    *cost = cross_entropy(p, data_, &g);
    const arma::vec gv = pack(g);
    std::copy(gv.begin(), gv.end(), gradient);
    return std::isfinite(*cost) && gv.is_finite();
  }
  int NumParameters() const override { return static_cast<int>(P_ * (d_ + 1)); }
  mutable arma::uword evaluations = 0;

 private:
  const std::vector<AttentionRows>& data_;
  arma::uword P_, d_;
};

}  // namespace

HedgehogFit fit_hedgehog(const HedgehogParams& init, const std::vector<AttentionRows>& data,
                         const HedgehogFitOptions& opt) {
  validate_data(init, data);
  require(opt.function_tolerance >= 0 && opt.gradient_tolerance >= 0 && opt.parameter_tolerance >= 0,
          "Hedgehog fit: tolerances must be >= 0, got {}, {}, {}", opt.function_tolerance, opt.gradient_tolerance,
          opt.parameter_tolerance);
  HedgehogFit res{init, cross_entropy(init, data, nullptr), 0, 0, 0, "no iterations asked"};
  res.final_objective = res.initial_objective;
  if (opt.iterations == 0) return res;
  arma::vec theta = pack(init);
  auto* fn = new CeresObjective(data, init.P(), init.d());
  ceres::GradientProblem problem(fn);  // takes ownership of fn
  ceres::GradientProblemSolver::Options o;
  o.line_search_direction_type = ceres::LBFGS;
  o.max_num_iterations = static_cast<int>(opt.iterations);
  o.function_tolerance = opt.function_tolerance;
  o.gradient_tolerance = opt.gradient_tolerance;
  o.parameter_tolerance = opt.parameter_tolerance;
  o.logging_type = ceres::SILENT;
  o.minimizer_progress_to_stdout = false;
  ceres::GradientProblemSolver::Summary s;
  ceres::Solve(o, problem, theta.memptr(), &s);
  if (!theta.is_finite()) throw NumericalError("Hedgehog fit produced non-finite parameters");
  res.params = unpack(theta.memptr(), init.P(), init.d());
  res.final_objective = cross_entropy(res.params, data, nullptr);
  res.iterations = s.iterations.empty() ? 0 : s.iterations.size() - 1;
  res.evaluations = fn->evaluations;
  res.termination = s.message;
  return res;
}

}  // namespace kestrel
