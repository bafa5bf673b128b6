// advise's stop rule before and after --time-budget (issue 66 item 5): on each input of `kestrel reproduce advise`
// (quick or paper sizes), advise as the reproduction runs it (positive estimators x iid, orthogonal and simplex), once
// with the old rule (at most 1024 draws around an answer, no work budget: --max-draws 1024 --time-budget 1e6, which
// stops exactly where the old default did) and once with the defaults. Prints per input the wall seconds, the counted
// work (seconds at kWorkPerSecond) and the rows not settled, before and after, as a Markdown table.
// Build and run: bash bench/settle.sh BUILD_DIR [--quick] [NAME] (NAME: that input only, the defaults only, for a
// profiler).
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/parallel.hpp"
#include "experiments/advise/advise.hpp"

using namespace kestrel;

namespace {

struct Run {
  double seconds = 0, work = 0;
  int open = 0, rows = 0;
};

Run run(const experiments::AdviseCase& c, const experiments::Options& opt, arma::uword rows, bool before) {
  AdviseOptions o;
  o.budget = c.budget;
  o.seed = opt.seed;
  o.rows = rows;
  o.timing = false;
  o.causal = c.causal;
  o.samplers = {Sampler::Iid, Sampler::Orthogonal, Sampler::Simplex};
  if (before) o.max_draws = 1024, o.time_budget = 1e6;
  const auto t0 = std::chrono::steady_clock::now();
  const Advice a = advise(c.Q, c.K, c.V, o);
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const AdviceRow& x : a.rows) {
    if (x.status != "ok") continue;
    ++r.rows, r.work += x.work_seconds, r.open += x.decision == "not settled";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  single_threaded_blas();  // as the kestrel command line runs
  keep_freed_memory();
  experiments::Options opt;
  opt.quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const arma::uword rows = opt.quick ? 64 : 128;  // the reproduction's sampled rows (experiments/advise/advise.cpp)
  std::printf("| input | rows | seconds before | after | work s before | after | not settled before | after |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  Run tb, ta;
  const char* only = argc > 1 && std::strcmp(argv[argc - 1], "--quick") != 0 ? argv[argc - 1] : nullptr;
  for (const auto& c : experiments::advise_cases(opt)) {
    if (only && c.name != only) continue;
    if (only) {
      const Run a = run(c, opt, rows, false);
      std::printf("%s: %.1f s, %.1f s counted\n", only, a.seconds, a.work);
      continue;
    }
    const Run b = run(c, opt, rows, true), a = run(c, opt, rows, false);
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %d | %d |\n", c.name.c_str(), a.rows, b.seconds, a.seconds,
                b.work, a.work, b.open, a.open);
    std::fflush(stdout);
    tb.seconds += b.seconds, ta.seconds += a.seconds, tb.work += b.work, ta.work += a.work;
    tb.open += b.open, ta.open += a.open, ta.rows += a.rows;
  }
  std::printf("| all | %d | %.1f | %.1f | %.1f | %.1f | %d | %d |\n", ta.rows, tb.seconds, ta.seconds, tb.work, ta.work,
              tb.open, ta.open);
}
