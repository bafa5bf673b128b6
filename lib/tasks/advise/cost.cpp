// advise's cost: FLOPs, bytes and state memory of exact and random-feature attention (causal or not) at every M some
// row needs, and both timed on this machine for the recommended row (issue 66 item 3: exact attention is a candidate).
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/rng.hpp"

namespace kestrel::advise_steps {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double exact_attention_flops(double Lq, double Lk, double d, double dv, bool causal) {
  // Q K^T (2 d a pair), exp (1), A [V 1] (2 (dv + 1)) over the pairs: Lq Lk, or L (L + 1) / 2 under a causal mask.
  const double pairs = causal ? Lk * (Lk + 1) / 2 : Lq * Lk;
  return pairs * (2 * d + 1 + 2 * (dv + 1));
}

double rf_attention_flops(double Lq, double Lk, double d, double dv, double M) {
  // Features 2 (Lq + Lk) M d + exp (Lq + Lk) M, S^T [V 1] 2 Lk M (dv + 1), P (...) 2 Lq M (dv + 1); prefix sums
  // (causal) add each key's term to a running S and read it per query, at the same count.
  return (Lq + Lk) * M * (2 * d + 1) + 2 * (Lq + Lk) * M * (dv + 1);
}

double crossover_length(double M, bool causal) {
  // Lq = Lk = L: exact L^2 c (causal L (L + 1) c / 2) against random features 2 L M c, c = 2d + 2dv + 3.
  return causal ? 4 * M - 1 : 2 * M;
}

arma::uword paying_budget(double Lq, double Lk, double d, double dv, bool causal) {
  const double per_feature = rf_attention_flops(Lq, Lk, d, dv, 1);  // linear in M
  const double m = std::ceil(exact_attention_flops(Lq, Lk, d, dv, causal) / per_feature) - 1;
  return static_cast<arma::uword>(std::max(1.0, m));
}

// The FLOPs and memory of exact and random-feature attention at every M some row needs.
void attention_costs(Advice& a) {
  const double Lq = static_cast<double>(a.Lq), Lk = static_cast<double>(a.Lk), d = static_cast<double>(a.d);
  const double dv = static_cast<double>(a.dv ? a.dv : 1);
  const bool causal = a.options.causal;
  a.cost.causal = causal;
  a.cost.exact_flops = exact_attention_flops(Lq, Lk, d, dv, causal);
  // Scores held in fp32 if materialised (half of them under a causal mask).
  a.cost.exact_bytes = 4 * ((causal ? Lk * (Lk + 1) / 2 : Lq * Lk) + (Lq + Lk) * d + Lk * dv + Lq * dv);
  a.cost.exact_state_bytes = 4 * Lk * (d + dv);
  std::vector<arma::uword> ms;
  for (const auto& r : a.rows)  // (a hybrid's cost is not that of M features: left out)
    if (r.status == "ok" && r.m_p95 && r.note.rfind("a hybrid", 0) != 0) ms.push_back(r.m_p95);
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  for (arma::uword m : ms) {
    const double M = static_cast<double>(m);
    a.cost.m.push_back(m);
    a.cost.rf_flops.push_back(rf_attention_flops(Lq, Lk, d, dv, M));
    a.cost.rf_bytes.push_back(4 * ((Lq + Lk) * M + M * (dv + 1) + (Lq + Lk) * d + Lk * dv + Lq * dv));
    a.cost.rf_state_bytes.push_back(4 * M * (dv + 1 + d));
    a.cost.crossover_length.push_back(crossover_length(M, causal));
  }
}

// Exact and random-feature attention timed on this machine (the best row's estimator at its M), median of 3.
void time_attention(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted,
                    const std::function<void(const std::string&)>& say) {
  const auto& opt = a.options;
  say("timing exact and random-feature attention on this machine");
  const AdviceRow& b = a.rows[*a.best];
  const Estimator* e = nullptr;
  for (const auto& f : fitted)
    if (f && f->info().name == b.estimator) e = f.get();
  auto median3 = [](auto&& run) {
    std::vector<double> t;
    for (int k = 0; k < 3; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[1];
  };
  const arma::uword timed = std::min(in.Qa.n_cols, kExactTimedRows);
  a.cost.exact_timed_rows = timed;
  // Causal: timed unmasked and scaled by the share of pairs the mask keeps, (L + 1) / 2L (a blocked masked kernel
  // skips the rest; said in the report).
  const double Lk = static_cast<double>(in.Ka.n_cols);
  a.cost.exact_seconds = median3([&] { exact_attention(in.Qa.head_cols(timed), in.Ka, in.V); }) *
                         static_cast<double>(in.Qa.n_cols) / static_cast<double>(timed) *
                         (opt.causal ? (Lk + 1) / (2 * Lk) : 1.0);
  const double rf_bytes = 8.0 * static_cast<double>(in.Qa.n_cols + in.Ka.n_cols) * static_cast<double>(b.m_p95);
  if (!e)
    a.cost.rf_not_timed = "the recommended map is learned; only random features are timed here so far";
  else if (rf_bytes > kMaxFeatureBytes)
    a.cost.rf_not_timed =
        fmt::format("its features at M = {} for {} queries and {} keys need {:.3g} GB (at most {:.3g} GB)", b.m_p95,
                    in.Qa.n_cols, in.Ka.n_cols, rf_bytes / 1e9, kMaxFeatureBytes / 1e9);
  else {
    Rng rng(opt.seed, Stream::Features, 1);
    a.cost.rf_seconds = median3([&] {
      const Draw w = draw_columns(*e, b.m_p95, rng, parse_sampler(b.sampler));
      if (opt.causal)
        approximate_causal_attention(*e, w, in.Qa, arma::regspace<arma::uvec>(0, in.Qa.n_cols - 1), in.Ka, in.V);
      else
        approximate_attention(*e, w, in.Qa, in.Ka, in.V);
    });
    a.cost.timed_m = b.m_p95;
    a.cost.timed_estimator = row_label(b);
  }
}

}  // namespace kestrel::advise_steps
