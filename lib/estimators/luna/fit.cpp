// Training of LUNA maps (see fit.hpp; LUNA section 3.2, issue #9): objective, its hand-written reverse-mode
// gradient (issue #19: about 3 forward passes instead of n_parameters / 16 Jet passes), Ceres' L-BFGS.
#include "estimators/luna/fit.hpp"

#include <array>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include <ceres/dynamic_autodiff_cost_function.h>
#include <ceres/gradient_problem.h>
#include <ceres/gradient_problem_solver.h>
#include <ceres/version.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "estimators/luna/model.hpp"

namespace kestrel {

namespace {
// Parameter groups, in this order: W (row-major P x d), b, u, v, A (row-major C x h), gate_w, gate_gamma,
// log-temperature.
enum Group { kW, kB, kU, kV, kA, kGw, kGg, kTau, kGroups };
constexpr int kStride = 16;  // Jet width: derivatives are computed 16 parameters per pass
}  // namespace

struct LunaObjective::Impl {
  LunaParams init;
  bool task = false;
  arma::mat X;
  arma::umat pairs;
  arma::vec inv_k;  // 1 / K(x_i, x_j) per pair (kernel fit)
  arma::uvec labels;
  arma::uword n_classes = 0;
  std::array<std::vector<double>, kGroups> full;
  std::array<bool, kGroups> trainable{};

  // The objective from the features F (n x M, row-major) and the log-temperature, in any scalar type.
  template <typename T>
  T loss(const std::vector<T>& F, const T& tau) const {
    using std::exp;
    using std::log;
    const std::size_t n = X.n_cols, M = init.M();
    T out(0.0);
    if (!task) {
      for (arma::uword q = 0; q < pairs.n_cols; ++q) {
        const T* a = &F[pairs(0, q) * M];
        const T* b = &F[pairs(1, q) * M];
        T dot(0.0);
        for (std::size_t c = 0; c < M; ++c) dot += a[c] * b[c];
        const T e = dot * inv_k(q) - 1.0;
        out += e * e;
      }
      return out / static_cast<double>(pairs.n_cols);
    }
    const std::size_t nc = n_classes;
    std::vector<T> S(nc * M, T(0.0)), z(nc);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < M; ++c) S[labels(i) * M + c] += F[i * M + c];
    const T scale = exp(tau) / static_cast<double>(n - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const T* a = &F[i * M];
      T self(0.0);
      for (std::size_t c = 0; c < M; ++c) self += a[c] * a[c];
      T mx(0.0);
      for (std::size_t cl = 0; cl < nc; ++cl) {
        T dot(0.0);
        for (std::size_t c = 0; c < M; ++c) dot += a[c] * S[cl * M + c];
        if (cl == labels(i)) dot -= self;  // leave-one-out: no self-pair
        z[cl] = scale * dot;
        if (cl == 0 || z[cl] > mx) mx = z[cl];
      }
      T sum(0.0);
      for (std::size_t cl = 0; cl < nc; ++cl) sum += exp(z[cl] - mx);
      out += mx + log(sum) - z[labels(i)];
    }
    return out / static_cast<double>(n);
  }

  template <typename T>
  luna_detail::MapRef<T> map_ref(const std::array<std::vector<T>, kGroups>& g) const {
    return {g[kW].data(),  g[kB].data(), g[kU].data(), g[kV].data(), g[kA].data(), g[kGw].data(),
            g[kGg].data(), init.P(),     init.d(),     init.C(),     init.h(),     init.variant == LunaVariant::Gated};
  }

  template <typename T>
  std::vector<T> features(const luna_detail::MapRef<T>& r) const {
    const std::size_t n = X.n_cols, M = init.M();
    std::vector<T> F(n * M), hidden(init.h());
    for (std::size_t i = 0; i < n; ++i) luna_detail::phi_point(r, X.colptr(i), &F[i * M], hidden.data());
    return F;
  }

  // Ceres' automatic differentiation (the reference the analytic gradient is tested against).
  struct Functor {
    const Impl* m;
    template <typename T>
    bool operator()(T const* const* params, T* out) const {
      std::array<std::vector<T>, kGroups> g;
      int k = 0;
      for (int gi = 0; gi < kGroups; ++gi) {
        const auto& f = m->full[gi];
        g[gi].resize(f.size());
        if (m->trainable[gi]) {
          for (std::size_t i = 0; i < f.size(); ++i) g[gi][i] = params[k][i];
          ++k;
        } else {
          for (std::size_t i = 0; i < f.size(); ++i) g[gi][i] = T(f[i]);
        }
      }
      out[0] = m->loss(m->features(m->map_ref(g)), g[kTau][0]);
      return true;
    }
  };

  // dLoss/dF (n x M, row-major) and dLoss/dtau, for the features F the value was computed from.
  std::vector<double> loss_gradient(const std::vector<double>& F, double tau, double& dtau) const {
    const std::size_t n = X.n_cols, M = init.M();
    std::vector<double> G(n * M, 0.0);
    dtau = 0;
    if (!task) {  // L = (1/N) sum_q e_q^2, e_q = F_a . F_b / K_q - 1
      for (arma::uword q = 0; q < pairs.n_cols; ++q) {
        const double* a = &F[pairs(0, q) * M];
        const double* b = &F[pairs(1, q) * M];
        double dot = 0;
        for (std::size_t c = 0; c < M; ++c) dot += a[c] * b[c];
        const double w = 2.0 * (dot * inv_k(q) - 1.0) * inv_k(q) / static_cast<double>(pairs.n_cols);
        double* ga = &G[pairs(0, q) * M];
        double* gb = &G[pairs(1, q) * M];
        for (std::size_t c = 0; c < M; ++c) ga[c] += w * b[c], gb[c] += w * a[c];
      }
      return G;
    }
    // z_il = s (F_i . S_l - [l = y_i] F_i . F_i), S_l = sum_{j: y_j = l} F_j, s = e^tau / (n - 1);
    // delta_il = dL/dz_il = (softmax_l(z_i) - [l = y_i]) / n;
    // dL/dF_i = s (sum_l delta_il S_l + T_{y_i} - 2 delta_{i y_i} F_i), T_l = sum_j delta_jl F_j; dL/dtau = sum delta
    // z.
    const std::size_t nc = n_classes;
    std::vector<double> S(nc * M, 0.0), T(nc * M, 0.0), delta(n * nc);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < M; ++c) S[labels(i) * M + c] += F[i * M + c];
    const double scale = std::exp(tau) / static_cast<double>(n - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const double* a = &F[i * M];
      double self = 0;
      for (std::size_t c = 0; c < M; ++c) self += a[c] * a[c];
      double* z = &delta[i * nc];
      double mx = 0;
      for (std::size_t cl = 0; cl < nc; ++cl) {
        double dot = 0;
        for (std::size_t c = 0; c < M; ++c) dot += a[c] * S[cl * M + c];
        if (cl == labels(i)) dot -= self;
        z[cl] = scale * dot;
        if (cl == 0 || z[cl] > mx) mx = z[cl];
      }
      double sum = 0;
      for (std::size_t cl = 0; cl < nc; ++cl) sum += std::exp(z[cl] - mx);
      for (std::size_t cl = 0; cl < nc; ++cl) {
        const double dl = (std::exp(z[cl] - mx) / sum - (cl == labels(i) ? 1.0 : 0.0)) / static_cast<double>(n);
        dtau += dl * z[cl];
        z[cl] = dl;  // delta overwrites z
        for (std::size_t c = 0; c < M; ++c) T[cl * M + c] += dl * a[c];
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      double* gi = &G[i * M];
      const double* a = &F[i * M];
      const double* dl = &delta[i * nc];
      for (std::size_t cl = 0; cl < nc; ++cl)
        for (std::size_t c = 0; c < M; ++c) gi[c] += dl[cl] * S[cl * M + c];
      const std::size_t y = labels(i);
      for (std::size_t c = 0; c < M; ++c) gi[c] = scale * (gi[c] + T[y * M + c] - 2.0 * dl[y] * a[c]);
    }
    return G;
  }

  // Reverse mode through phi (model.hpp) for every point: adds dLoss/dparameters to grad, given G = dLoss/dF.
  void map_gradient(const luna_detail::MapRef<double>& r, const std::vector<double>& G,
                    std::array<std::vector<double>, kGroups>& grad) const {
    const std::size_t P = r.P, d = r.d, C = r.C, h = r.h, M = P * C;
    std::vector<double> hid(h), cs(h), dhid(h);
    for (std::size_t i = 0; i < X.n_cols; ++i) {
      const double* x = X.colptr(i);
      const double* Gi = &G[i * M];
      double g = 1.0 / std::sqrt(static_cast<double>(P)), sq = 0;
      if (r.gated) {
        double s = 0;
        for (std::size_t j = 0; j < d; ++j) sq += x[j] * x[j];
        s = r.gg[0] * sq;
        for (std::size_t j = 0; j < d; ++j) s += r.gw[j] * x[j];
        g *= std::exp(s);
      }
      double dg = 0;
      for (std::size_t p = 0; p < P; ++p) {
        double z = r.b[p];
        for (std::size_t j = 0; j < d; ++j) z += r.W[p * d + j] * x[j];
        for (std::size_t k = 0; k < h; ++k) {
          const double a = r.u[k] * z + r.v[k];
          hid[k] = std::sin(a), cs[k] = std::cos(a), dhid[k] = 0;
        }
        for (std::size_t c = 0; c < C; ++c) {
          const double* Ac = r.A + c * h;
          double psi = 0;
          for (std::size_t k = 0; k < h; ++k) psi += Ac[k] * hid[k];
          const double gpc = Gi[p * C + c], dpsi = g * gpc;
          dg += gpc * psi;
          double* dA = &grad[kA][c * h];
          for (std::size_t k = 0; k < h; ++k) dA[k] += dpsi * hid[k], dhid[k] += dpsi * Ac[k];
        }
        double dz = 0;
        for (std::size_t k = 0; k < h; ++k) {
          const double da = dhid[k] * cs[k];
          grad[kU][k] += da * z, grad[kV][k] += da, dz += da * r.u[k];
        }
        grad[kB][p] += dz;
        double* dW = &grad[kW][p * d];
        for (std::size_t j = 0; j < d; ++j) dW[j] += dz * x[j];
      }
      if (r.gated) {  // g = P^-1/2 e^s: dL/ds = g dL/dg
        const double ds = dg * g;
        grad[kGg][0] += ds * sq;
        for (std::size_t j = 0; j < d; ++j) grad[kGw][j] += ds * x[j];
      }
    }
  }

  // The parameter groups with the trainable ones taken from theta (packed in group order).
  std::array<std::vector<double>, kGroups> groups(const double* theta) const {
    auto g = full;
    std::size_t off = 0;
    for (int gi = 0; gi < kGroups; ++gi)
      if (trainable[gi])
        for (double& x : g[gi]) x = theta[off++];
    return g;
  }

  std::unique_ptr<ceres::DynamicAutoDiffCostFunction<Functor, kStride>> cost;

  void setup() {
    const LunaParams& p = init;
    const arma::mat Wt = p.W.t(), At = p.A.t();
    full[kW].assign(Wt.begin(), Wt.end());
    full[kB].assign(p.b.begin(), p.b.end());
    full[kU].assign(p.u.begin(), p.u.end());
    full[kV].assign(p.v.begin(), p.v.end());
    full[kA].assign(At.begin(), At.end());
    full[kGw].assign(p.gate_w.begin(), p.gate_w.end());
    full[kGg] = {p.gate_gamma};
    full[kTau] = {std::log(10.0)};  // initial temperature 10: logits of order 1 for kernel values of order 0.1
    trainable.fill(false);
    if (p.variant != LunaVariant::FixedRff) {
      trainable[kW] = trainable[kB] = trainable[kA] = true;
      if (p.variant != LunaVariant::BankCoef) trainable[kU] = trainable[kV] = true;
      if (p.variant == LunaVariant::Gated) trainable[kGw] = trainable[kGg] = true;
      if (task) trainable[kTau] = true;
    }
    cost = std::make_unique<ceres::DynamicAutoDiffCostFunction<Functor, kStride>>(new Functor{this});
    for (int gi = 0; gi < kGroups; ++gi)
      if (trainable[gi]) cost->AddParameterBlock(static_cast<int>(full[gi].size()));
    cost->SetNumResiduals(1);
  }

  // Block pointers into theta (packed trainable groups in group order).
  std::vector<double*> blocks(double* theta) const {
    std::vector<double*> out;
    std::size_t off = 0;
    for (int gi = 0; gi < kGroups; ++gi)
      if (trainable[gi]) {
        out.push_back(theta + off);
        off += full[gi].size();
      }
    return out;
  }
};

LunaObjective::LunaObjective(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LunaObjective::~LunaObjective() = default;
LunaObjective::LunaObjective(LunaObjective&&) noexcept = default;

LunaObjective LunaObjective::kernel_fit(const LunaParams& init, const arma::mat& X, const arma::umat& pairs) {
  validate(init);
  validate_points(X, "LUNA training set");
  require(X.n_rows == init.d(), "LUNA training points have dimension {}, the map {}", X.n_rows, init.d());
  require(pairs.n_rows == 2 && pairs.n_cols > 0, "LUNA kernel fit needs a 2 x N pair list with N > 0, got {} x {}",
          pairs.n_rows, pairs.n_cols);
  require(pairs.max() < X.n_cols, "LUNA pair index {} is out of range for {} points", pairs.max(), X.n_cols);
  auto m = std::make_unique<Impl>();
  m->init = init;
  m->X = X;
  m->pairs = pairs;
  m->inv_k.set_size(pairs.n_cols);
  for (arma::uword q = 0; q < pairs.n_cols; ++q) {
    require(pairs(0, q) != pairs(1, q), "LUNA training pair {} pairs point {} with itself", q, pairs(0, q));
    const double lk = log_kernel(Kernel{init.target_alpha}, X.col(pairs(0, q)), X.col(pairs(1, q)))(0, 0);
    m->inv_k(q) = std::exp(-lk);
    require(std::isfinite(m->inv_k(q)), "LUNA training pair {}: log K = {} is beyond double range; scale the data", q,
            lk);
  }
  m->setup();
  return LunaObjective(std::move(m));
}

LunaObjective LunaObjective::task_fit(const LunaParams& init, const arma::mat& X, const arma::uvec& labels,
                                      arma::uword n_classes) {
  validate(init);
  validate_points(X, "LUNA training set");
  require(X.n_rows == init.d(), "LUNA training points have dimension {}, the map {}", X.n_rows, init.d());
  require(X.n_cols >= 2, "LUNA task fit needs >= 2 training points, got {}", X.n_cols);
  require(n_classes > 0 && labels.n_elem == X.n_cols && labels.max() < n_classes,
          "LUNA task fit: {} labels (max {}) for {} points and {} classes", labels.n_elem, labels.max(), X.n_cols,
          n_classes);
  auto m = std::make_unique<Impl>();
  m->init = init;
  m->task = true;
  m->X = X;
  m->labels = labels;
  m->n_classes = n_classes;
  m->setup();
  return LunaObjective(std::move(m));
}

arma::uword LunaObjective::n_parameters() const {
  arma::uword n = 0;
  for (int gi = 0; gi < kGroups; ++gi)
    if (impl_->trainable[gi]) n += impl_->full[gi].size();
  return n;
}

arma::vec LunaObjective::initial() const {
  arma::vec theta(n_parameters());
  arma::uword off = 0;
  for (int gi = 0; gi < kGroups; ++gi)
    if (impl_->trainable[gi])
      for (double x : impl_->full[gi]) theta(off++) = x;
  return theta;
}

double LunaObjective::value(const arma::vec& theta) const {
  require(theta.n_elem == n_parameters(), "LUNA objective: {} parameters, expected {}", theta.n_elem, n_parameters());
  const auto g = impl_->groups(theta.memptr());
  return impl_->loss(impl_->features(impl_->map_ref(g)), g[kTau][0]);
}

double LunaObjective::value_and_gradient(const arma::vec& theta, arma::vec& gradient) const {
  require(theta.n_elem == n_parameters(), "LUNA objective: {} parameters, expected {}", theta.n_elem, n_parameters());
  gradient.zeros(theta.n_elem);
  const auto g = impl_->groups(theta.memptr());
  const auto r = impl_->map_ref(g);
  const std::vector<double> F = impl_->features(r);
  const double out = impl_->loss(F, g[kTau][0]);
  if (theta.is_empty()) return out;
  std::array<std::vector<double>, kGroups> grad;
  for (int gi = 0; gi < kGroups; ++gi) grad[gi].assign(g[gi].size(), 0.0);
  impl_->map_gradient(r, impl_->loss_gradient(F, g[kTau][0], grad[kTau][0]), grad);
  arma::uword off = 0;
  for (int gi = 0; gi < kGroups; ++gi)
    if (impl_->trainable[gi])
      for (double x : grad[gi]) gradient(off++) = x;
  return out;
}

double LunaObjective::value_and_gradient_autodiff(const arma::vec& theta, arma::vec& gradient) const {
  require(theta.n_elem == n_parameters(), "LUNA objective: {} parameters, expected {}", theta.n_elem, n_parameters());
  gradient.zeros(theta.n_elem);
  if (theta.is_empty()) return value(theta);
  arma::vec t = theta;
  const auto b = impl_->blocks(t.memptr());
  auto jac = impl_->blocks(gradient.memptr());  // one residual: each Jacobian block is that block's gradient
  double out = 0;
  if (!impl_->cost->Evaluate(b.data(), &out, jac.data())) throw NumericalError("LUNA objective evaluation failed");
  return out;
}

LunaParams LunaObjective::unpack(const arma::vec& theta) const {
  require(theta.n_elem == n_parameters(), "LUNA objective: {} parameters, expected {}", theta.n_elem, n_parameters());
  auto full = impl_->full;
  arma::uword off = 0;
  for (int gi = 0; gi < kGroups; ++gi)
    if (impl_->trainable[gi])
      for (double& x : full[gi]) x = theta(off++);
  LunaParams p = impl_->init;
  p.W = arma::mat(full[kW].data(), p.d(), p.P()).t();
  p.b = arma::vec(full[kB]);
  p.u = arma::vec(full[kU]);
  p.v = arma::vec(full[kV]);
  p.A = arma::mat(full[kA].data(), p.h(), p.C()).t();
  p.gate_w = arma::vec(full[kGw]);
  p.gate_gamma = full[kGg][0];
  return p;
}

namespace {
class CeresObjective final : public ceres::FirstOrderFunction {
 public:
  explicit CeresObjective(const LunaObjective& o) : o_(o) {}
  bool Evaluate(const double* x, double* cost, double* gradient) const override {
    const arma::vec theta(x, o_.n_parameters());
    if (gradient) {
      arma::vec g;
      *cost = o_.value_and_gradient(theta, g);
      std::copy(g.begin(), g.end(), gradient);
      ++evaluations;
      return std::isfinite(*cost) && g.is_finite();
    }
    *cost = o_.value(theta);
    ++evaluations;
    return std::isfinite(*cost);  // a non-finite value makes the line search step back
  }
  int NumParameters() const override { return static_cast<int>(o_.n_parameters()); }
  mutable arma::uword evaluations = 0;

 private:
  const LunaObjective& o_;
};
}  // namespace

LunaTrainResult train_luna(const LunaObjective& objective, const LunaTrainOptions& opt) {
  LunaTrainResult res;
  arma::vec theta = objective.initial();
  res.initial_objective = objective.value(theta);
  if (theta.is_empty() || opt.iterations == 0) {
    res.params = objective.unpack(theta);
    res.final_objective = res.initial_objective;
    res.termination = "nothing to train";
    return res;
  }
  auto* fn = new CeresObjective(objective);
  ceres::GradientProblem problem(fn);  // takes ownership of fn
  ceres::GradientProblemSolver::Options o;
  o.line_search_direction_type = ceres::LBFGS;
  o.max_num_iterations = static_cast<int>(opt.iterations);
  o.function_tolerance = 1e-12;
  o.gradient_tolerance = 1e-12;
  o.parameter_tolerance = 1e-14;
  o.logging_type = ceres::SILENT;
  o.minimizer_progress_to_stdout = false;
  ceres::GradientProblemSolver::Summary s;
  ceres::Solve(o, problem, theta.memptr(), &s);
  if (!theta.is_finite()) throw NumericalError("LUNA training produced non-finite parameters");
  res.params = objective.unpack(theta);
  res.final_objective = objective.value(theta);
  res.iterations = s.iterations.empty() ? 0 : s.iterations.size() - 1;
  res.evaluations = fn->evaluations;
  res.termination = s.message;
  return res;
}

arma::umat random_pairs(arma::uword n, arma::uword N, std::uint64_t seed) {
  require(n >= 2, "random pairs need >= 2 points, got {}", n);
  require(N > 0, "number of pairs must be > 0, got 0");
  const arma::uword all = n * (n - 1) / 2;
  arma::umat out(2, std::min(N, all));
  if (N >= all) {
    arma::uword q = 0;
    for (arma::uword i = 0; i < n; ++i)
      for (arma::uword j = i + 1; j < n; ++j) out(0, q) = i, out(1, q++) = j;
    return out;
  }
  Rng rng(seed, Stream::Fit, 1);
  std::set<std::pair<arma::uword, arma::uword>> seen;
  arma::uword q = 0;
  while (q < N) {
    arma::uword i = static_cast<arma::uword>(rng.uniform() * n), j = static_cast<arma::uword>(rng.uniform() * n);
    if (i == j) continue;
    if (i > j) std::swap(i, j);
    if (!seen.insert({i, j}).second) continue;
    out(0, q) = i, out(1, q++) = j;
  }
  return out;
}

std::string ceres_version() { return CERES_VERSION_STRING; }

}  // namespace kestrel
