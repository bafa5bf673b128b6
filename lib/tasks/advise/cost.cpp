// advise's cost: FLOPs and bytes of exact and random-feature attention at every M some row needs, and both timed on
// this machine for the recommended row.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/rng.hpp"

namespace kestrel::advise_steps {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The FLOPs and memory of exact and random-feature attention at every M some row needs.
void attention_costs(Advice& a) {
  const double Lq = static_cast<double>(a.Lq), Lk = static_cast<double>(a.Lk), d = static_cast<double>(a.d);
  const double dv = static_cast<double>(a.dv ? a.dv : 1);
  // Exact: Q K^T (2 Lq Lk d), exp (Lq Lk), A [V 1] (2 Lq Lk (dv + 1)); scores held in fp32 if materialised.
  a.cost.exact_flops = Lq * Lk * (2 * d + 1 + 2 * (dv + 1));
  a.cost.exact_bytes = 4 * (Lq * Lk + (Lq + Lk) * d + Lk * dv + Lq * dv);
  std::vector<arma::uword> ms;
  for (const auto& r : a.rows)  // (a hybrid's cost is not that of M features: left out)
    if (r.status == "ok" && r.m_p95 && r.note.rfind("a hybrid", 0) != 0) ms.push_back(r.m_p95);
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  for (arma::uword m : ms) {
    const double M = static_cast<double>(m);
    // Features 2 (Lq + Lk) M d + exp (Lq + Lk) M, S^T [V 1] 2 Lk M (dv + 1), P (...) 2 Lq M (dv + 1).
    const double flops = (Lq + Lk) * M * (2 * d + 1) + 2 * (Lq + Lk) * M * (dv + 1);
    a.cost.m.push_back(m);
    a.cost.rf_flops.push_back(flops);
    a.cost.rf_bytes.push_back(4 * ((Lq + Lk) * M + M * (dv + 1) + (Lq + Lk) * d + Lk * dv + Lq * dv));
    // Lq = Lk = L: exact L^2 (2d + 2dv + 3) against RF 2L M (2d + 2dv + 3).
    a.cost.crossover_length.push_back(2 * M);
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
  a.cost.exact_seconds = median3([&] { exact_attention(in.Qa.head_cols(timed), in.Ka, in.V); }) *
                         static_cast<double>(in.Qa.n_cols) / static_cast<double>(timed);
  const double rf_bytes = 8.0 * static_cast<double>(in.Qa.n_cols + in.Ka.n_cols) * static_cast<double>(b.m_p95);
  if (e && rf_bytes > kMaxFeatureBytes)
    a.cost.rf_not_timed =
        fmt::format("its features at M = {} for {} queries and {} keys need {:.3g} GB (at most {:.3g} GB)", b.m_p95,
                    in.Qa.n_cols, in.Ka.n_cols, rf_bytes / 1e9, kMaxFeatureBytes / 1e9);
  else if (e) {
    Rng rng(opt.seed, Stream::Features, 1);
    a.cost.rf_seconds = median3([&] {
      const Draw w = e->draw(b.m_p95, rng, parse_sampler(b.sampler));
      approximate_attention(*e, w, in.Qa, in.Ka, in.V);
    });
    a.cost.timed_m = b.m_p95;
    a.cost.timed_estimator = row_label(b);
  }
}

}  // namespace kestrel::advise_steps
