// advise's recommendation: the best row (the smallest M reaching the target at the 95th percentile), the choice
// between it and exact softmax attention at the input's L (by FLOPs; Advice::choice) and the words: the others ranked,
// the noise of its M, V's offset, fp16 and the cost; or the closest row when none reaches it.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"

namespace kestrel::advise_steps {

namespace {

std::string percent(double v) { return fmt::format("{:.3g}%", 100 * v); }

std::string count(arma::uword m, const AdviseOptions& opt) {
  return m ? std::to_string(m) : "> " + std::to_string(opt.budget);
}

std::string needs(const AdviceRow& r, const AdviseOptions& opt) {
  if (r.decision == "M") return fmt::format("needs M = {}", r.m_p95);
  if (r.decision == "out of reach") return fmt::format("needs M > {} (the budget)", opt.budget);
  return fmt::format("is not settled (M in [{}, {}])", r.m_p95_low, count(r.m_p95_high, opt));
}

// The recommendation: the smallest M reaching the target at the 95th percentile; ties to the smaller predicted error.
void choose_best(Advice& a) {
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    const auto& r = a.rows[i];
    if (r.status != "ok" || !r.m_p95) continue;
    if (!a.best || std::pair(r.m_p95, r.at_m_p95) < std::pair(a.rows[*a.best].m_p95, a.rows[*a.best].at_m_p95))
      a.best = i;
  }
}

std::string error_name(const Advice& a, const Inputs& in) {
  return a.options.quantity == AdviseQuantity::Kernel ? "kernel-entry error"
         : in.normaliser                              ? "row-normaliser error"
                                                      : "row error";
}

// Why a learned row out of reach is: its held-out and training errors at the grid's largest M. A training error below
// the target is a map that does not generalise from its sequences; above it, one that does not fit at that M.
std::string learned_unreached(const Advice& a) {
  std::string s;
  for (const auto& r : a.rows) {
    if (!learned(r) || r.status != "ok" || r.decision != "out of reach") continue;
    const double held = r.curve_p95.back(), train = r.curve_train_p95.back();
    s += fmt::format(
        " The learned map {} is out of reach at its largest fitted M = {}: {} on held-out sequences and {} on those it "
        "was fitted on, so {}.",
        r.estimator, r.curve_m.back(), percent(held), percent(train),
        train <= a.options.target
            ? "it fits the tokens it saw but does not carry over to others: fit it on more sequences"
            : "it does not reach the target even on the tokens it saw: it needs a larger M (--learned-features), "
              "longer fits (--fit-iterations) or another map");
  }
  return s;
}

// The words when no row reaches the target: the closest one, by the lowest 95th percentile at the largest M every
// curve reached (the budget unless some curve ended where the target is out of reach).
std::string unreached(Advice& a, const Inputs& in) {
  const auto& opt = a.options;
  double common = static_cast<double>(opt.budget);
  for (const auto& r : a.rows)
    if (r.status == "ok" && !r.curve_m.empty()) common = std::min(common, r.curve_m.back());
  auto at = [&](const AdviceRow& r) { return curve_at(r.curve_m, r.curve_p95, common); };
  const AdviceRow* closest = nullptr;
  for (const auto& r : a.rows)
    if (r.status == "ok" && !r.curve_m.empty() && (!closest || at(r) < at(*closest))) closest = &r;
  if (!closest) {  // no result to report: refused (every row the user chose cannot apply) or failed, with the reasons
    bool chosen = true;
    std::string why;
    for (const auto& r : a.rows) {
      chosen = chosen && r.status == "not applicable";
      why +=
          fmt::format("{}{}: {}", why.empty() ? "" : "; ", r.sampler == "any" ? r.estimator : row_label(r), r.reason);
    }
    if (chosen)
      throw InvalidArgument(
          fmt::format("no estimator can be evaluated for quantity {}: {}; choose other --estimators "
                      "or --samplers",
                      to_string(opt.quantity), why));
    throw NumericalError(fmt::format("no estimator could be evaluated on these inputs: {}", why));
  }
  // The closest row may be below the target where no M is named: its M is not settled (the noise leaves it open).
  const double closest_p95 = at(*closest);
  const bool below = closest_p95 <= opt.target;
  std::string s = fmt::format(
      "No estimator {} a 95th-percentile {} of {} within M <= {}{}. The closest is {}: {} at M = {}{}.",
      below ? "settles its M for" : "reaches", error_name(a, in), percent(opt.target), opt.budget,
      opt.pays_only ? fmt::format(" (--pays-only: beyond it exact attention costs fewer FLOPs at L = {})", a.Lk) : "",
      row_label(*closest), percent(closest_p95), common,
      !below              ? ""
      : learned(*closest) ? ", below the target, but within the spread over fits its M is still open"
                          : ", below the target, but within the simulation's noise its M is still open");
  s += learned_unreached(a);
  std::size_t open = 0, open_learned = 0, simulated = 0;  // rows not settled; rows simulated (they share the budget)
  double most = 0;                                        // the work that would settle the hardest one
  for (const auto& r : a.rows) {
    simulated += r.status == "ok" && r.work_seconds > 0;
    if (r.status == "ok" && r.decision == "not settled")
      learned(r) ? ++open_learned : (++open, most = std::max(most, r.settle_seconds));
  }
  if (open)
    s += fmt::format(
        " {} of the rows are not settled within --time-budget {:g} s{}: settling the hardest would take about {} of "
        "simulation, so --time-budget {:.0f} would settle them (its first half is shared by the {} simulated rows, "
        "each getting at least an equal share).",
        open, opt.time_budget, opt.max_draws ? fmt::format(" and --max-draws {}", opt.max_draws) : "", work_time(most),
        std::ceil(2 * most * static_cast<double>(simulated)), simulated);
  if (open_learned)
    s += fmt::format(
        " {} of the learned rows are not settled with {} fits per M: more fits (--fit-seeds) would "
        "narrow their interval.",
        open_learned, opt.fit_seeds);
  open += open_learned;
  if (open) {
    a.choice = "not settled";
    a.choice_reason = "no M is named and some row's M is still open";
    const bool beyond = std::any_of(a.rows.begin(), a.rows.end(), [](const AdviceRow& r) {
      return r.status == "ok" && r.decision == "not settled" && !r.m_p95_high;
    });
    if (open == open_learned) return s + " Or accept a larger --target.";
    return s + fmt::format(" Raise --time-budget to settle them{}, or accept a larger --target.",
                           beyond ? " (and --budget: an interval reaches beyond it)" : "");
  }
  a.choice_reason = opt.pays_only ? "no estimator reaches the target at an M where random features pay at this L"
                                  : "no estimator reaches the target within the budget";
  if (opt.quantity == AdviseQuantity::Kernel) {
    a.choice = "none";
    return s + " Raise --budget, or accept a larger --target.";
  }
  a.choice = "exact softmax";
  if (opt.pays_only) return s + " Keep exact softmax attention, or accept a larger --target.";
  return s + " Keep exact softmax attention, or raise --budget, or accept a larger --target.";
}

// The words for the best row, the others ranked, the noise of its M and what V's offset does to the metric.
// When V's mean row makes up most of mean |Y_i|^2 (each output row is close to mean(V)), what that does to errors
// relative to |Y| on this input. The error of a row scales with the values' spread about it, so: with a common offset
// in V (RMS |Y_i| at least the values' spread RMS |v_j - mean(V)|) they look small for any M, and --metric centred
// measures what differs between rows; with zero-mean V and attention close to uniform, |Y| is small against the
// values and they look large (centred, smaller still, is no help).
std::string offset_note(const Advice& a, const Inputs& in) {
  const auto& opt = a.options;
  if (a.offset_share <= 0.5 || in.normaliser ||
      !(opt.metric == AdviseMetric::Rmse || opt.metric == AdviseMetric::MeanAbs ||
        opt.metric == AdviseMetric::RowRelative))
    return "";
  if (std::all_of(a.rows.begin(), a.rows.end(), [](const AdviceRow& r) { return r.err1_p95 == 0; }))
    return "";  // exact rows (every key the same): no error to look small or large
  const arma::rowvec v = arma::mean(in.V, 0);
  const double rms_y = arma::norm(v) / std::sqrt(a.offset_share),
               spread = std::sqrt(arma::accu(arma::square(in.V.each_row() - v)) / static_cast<double>(in.V.n_rows));
  if (rms_y >= spread)
    return fmt::format(
        " V's mean row makes up {} of mean |Y_i|^2: V has a common offset (RMS |Y_i| = {:.3g} against the values' "
        "spread RMS |v_j - mean(V)| = {:.3g}), so each output row is close to mean(V) and errors relative to |Y| look "
        "small for any M; --metric centred gives the error relative to the centred output Y - mean(V), the one to "
        "decide by when what matters is how rows differ.",
        percent(a.offset_share), rms_y, spread);
  return fmt::format(
      " V's mean row makes up {} of mean |Y_i|^2: attention is close to uniform on these inputs, so each output row is "
      "close to mean(V), which is small against the values (RMS |Y_i| = {:.3g}, RMS |v_j - mean(V)| = {:.3g}); errors "
      "relative to |Y| therefore look large for any M. Relative to the centred output (--metric centred) they are "
      "larger still; --metric tv judges the attention weights themselves.",
      percent(a.offset_share), rms_y, spread);
}

std::string best_and_others(const Advice& a, const Inputs& in) {
  const auto& opt = a.options;
  const std::string what = error_name(a, in);
  const AdviceRow& b = a.rows[*a.best];
  std::string s = fmt::format(
      "{}{}, M = {}, the fewest features of the settled answers (the cost of feature attention "
      "grows with M): {} 95th-percentile {} {}{} (median {}).",
      b.estimator, b.sampler == "iid" ? "" : " with " + b.sampler + " features", b.m_p95,
      learned(b) ? "held-out" : "predicted", what, percent(b.at_m_p95),
      b.at_m_p95_se > 0 ? " +- " + percent(b.at_m_p95_se) : "", percent(b.at_m_median));
  std::vector<const AdviceRow*> ranked;  // the others, fewest features first (unreached last)
  for (const auto& r : a.rows)
    if (r.status == "ok" && &r != &b) ranked.push_back(&r);
  std::stable_sort(ranked.begin(), ranked.end(), [](const AdviceRow* x, const AdviceRow* y) {
    return (x->m_p95 ? x->m_p95 : ~arma::uword{0}) < (y->m_p95 ? y->m_p95 : ~arma::uword{0});
  });
  std::vector<std::string> others;
  for (const AdviceRow* r : ranked)
    if (others.size() < 4) others.push_back(row_label(*r) + " " + needs(*r, opt));
  if (!others.empty()) {
    s += " ";
    for (std::size_t i = 0; i < others.size(); ++i) s += (i ? "; " : "") + others[i];
    s += ".";
  }
  if (b.m_p95_low != b.m_p95_high)
    s += fmt::format(" Within the {} (+-2 SE) the M for the target lies in [{}, {}].",
                     learned(b) ? "spread over fits" : "simulation's noise", b.m_p95_low, count(b.m_p95_high, opt));
  for (const auto& r : a.rows)  // an open question that could change the answer
    if (r.status == "ok" && r.decision == "not settled" && r.m_p95_low && r.m_p95_low < b.m_p95)
      s += fmt::format(" {} is not settled and might need fewer (M in [{}, {}]; {}).", row_label(r), r.m_p95_low,
                       count(r.m_p95_high, opt),
                       learned(r) ? "more fits would settle it (--fit-seeds)"
                                  : fmt::format("about {} draws, {} of simulation, would settle it", r.draws_to_settle,
                                                work_time(r.settle_seconds)));
  return s + offset_note(a, in);
}

// The words on fp16 for the best row.
std::string format_words(const AdviceRow& b) {
  std::string s;
  if (b.range) {
    const auto& fmts = number_formats();
    for (std::size_t k = 0; k < fmts.size(); ++k)
      if (fmts[k].name == "fp16") {
        const auto& [raw, stab] = b.range->verdict[k];
        s += fmt::format(" fp16: {} without the stabiliser, {} with it.", raw, stab);
      }
  }
  return s;
}

// The best row's cost against exact attention's at this L, by FLOPs (machine-independent), with the state each keeps
// and the times measured on this machine; sets the choice.
std::string cost_words(Advice& a, const AdviceRow& b) {
  const auto& c = a.cost;
  const auto k = static_cast<std::size_t>(std::find(c.m.begin(), c.m.end(), b.m_p95) - c.m.begin());
  if (k == c.m.size()) {  // a hybrid: its cost is not that of M features
    a.choice = "random features";
    a.choice_reason = "a hybrid estimator: its cost is not compared with exact attention's";
    return "";
  }
  const bool pays = c.rf_flops[k] < c.exact_flops;
  const std::string kind = features_kind(b);
  a.choice = pays ? kind : "exact softmax";
  a.choice_reason = pays ? kind + " at the named M cost fewer FLOPs than exact attention at this L"
                         : "exact attention costs no more FLOPs than " + kind + " at the named M at this L";
  const std::string at = fmt::format("L = {}{}", a.Lk, c.causal ? ", causal" : "");
  std::string s = fmt::format(
      "{} {:.3g} GFLOP and keeps {:.3g} MB of keys and values against {:.3g} GFLOP "
      "and {:.3g} MB of key sums for {} at M = {}; {} cost fewer FLOPs from L > {:.0f}{}.",
      pays ? fmt::format(" At {}, exact softmax attention costs", at)
           : fmt::format("Keep exact softmax attention: at {} it costs", at),
      c.exact_flops / 1e9, c.exact_state_bytes / 1e6, c.rf_flops[k] / 1e9, c.rf_state_bytes[k] / 1e6, row_label(b),
      b.m_p95, kind, c.crossover_length[k],
      c.causal ? " (a causal mask halves exact attention's work)" : " when Lq = Lk");
  if (c.rf_seconds >= 0 && c.exact_seconds > 0)
    s += fmt::format(" Measured on this machine: {:.3g} s against {:.3g} s for exact attention ({:.2g}x).",
                     c.rf_seconds, c.exact_seconds, c.rf_seconds / c.exact_seconds);
  return s;
}

}  // namespace

std::string work_time(double seconds) {
  if (seconds < 60) return fmt::format("{:.2g} s", seconds);
  if (seconds < 3600) return fmt::format("{:.2g} min", seconds / 60);
  if (seconds < 86400) return fmt::format("{:.2g} h", seconds / 3600);
  return "more than a day";
}

std::string row_label(const AdviceRow& r) {
  return r.sampler == "iid" ? r.estimator : fmt::format("{} ({})", r.estimator, r.sampler);
}

void cost_and_recommendation(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted,
                             const std::function<void(const std::string&)>& say) {
  attention_costs(a);
  choose_best(a);
  if (a.options.timing && a.best && a.options.quantity == AdviseQuantity::Attention) time_attention(a, in, fitted, say);
  if (!a.best) {
    a.recommendation = unreached(a, in) + offset_note(a, in);
    return;
  }
  const AdviceRow& b = a.rows[*a.best];
  if (a.options.quantity != AdviseQuantity::Attention) {  // kernel entries: no attention to compare with
    a.choice = "random features";
    a.choice_reason = "the kernel's entries: no attention to compare with";
    a.recommendation = best_and_others(a, in) + format_words(b);
    return;
  }
  const std::string cost = cost_words(a, b);
  a.recommendation =
      a.choice == "exact softmax"
          ? cost + " If random features are wanted all the same: " + best_and_others(a, in) + format_words(b)
          : best_and_others(a, in) + format_words(b) + cost;
}

}  // namespace kestrel::advise_steps
