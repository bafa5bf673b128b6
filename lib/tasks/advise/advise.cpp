// `kestrel advise` (advise.hpp): fit every family on the user's points, predict the error over a sample of rows
// (simulated with nested draws, or exact), read off M, measure the features' exponents and the cost, and say what to
// use. The steps are in this folder (steps.hpp); this file runs them over families and samplers, and adds the learned
// rows (learned.hpp) when several sequences are given.
#include "tasks/advise/steps.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "tasks/advise/learned.hpp"

namespace kestrel {

using namespace advise_steps;

namespace {

// The learned rows of opt.learned on the head's sequences (learned.hpp).
void add_learned_rows(Advice& a, const HeadSequences* head, const AdviseOptions& opt, const Say& say) {
  if (opt.learned.empty()) return;
  require(head && head->Q.size() >= 2,
          "learned maps ({}) are judged on sequences they were not fitted on: give at least 2 sequences of the head",
          opt.learned.front());
  for (const std::string& name : opt.learned) {
    require(name == "hedgehog", "learned map '{}': the learned maps advise fits are: hedgehog", name);
    say("fitting the learned map " + name + " on " + std::to_string(head->Q.size() - opt.held_out) +
        " sequences, judged on " + std::to_string(opt.held_out));
    LearnedCurveOptions lo;
    lo.features = opt.learned_features;
    lo.held_out = opt.held_out;
    lo.fit_seeds = opt.fit_seeds;
    lo.seed = opt.seed;
    lo.fit.iterations = opt.fit_iterations;
    const bool scaled = !opt.scale_sqrt_d;  // scaling none: the logits are q.k; the fit reads q.k / sqrt(d)
    if (head->causal == opt.causal && !scaled) {
      a.rows.push_back(learned_row(learned_attention_curve(*head, lo), opt));
      continue;
    }
    HeadSequences h = *head;  // with advise's mask and logits, as the random rows (inputs.cpp: Qa, Ka)
    h.causal = opt.causal;
    const double root4 = std::pow(static_cast<double>(h.Q.front().n_rows), 0.25);
    if (scaled)
      for (auto* side : {&h.Q, &h.K})
        for (arma::mat& X : *side) X *= root4;
    a.rows.push_back(learned_row(learned_attention_curve(h, lo), opt));
  }
}

// One (estimator, sampler) row predicted (predict.cpp) within in.work_allowance; a family's Undefined is "not
// applicable", any other failure "failed", each with its reason.
AdviceRow one_row(const AdviceRow& base, Sampler sampler, const Family& f, const Estimator& e,
                  const std::optional<ThreePointForm>& form, const Inputs& in, const ExactAttention& exact,
                  const arma::vec& log_norm, const AdviseOptions& opt, const Say& say) {
  AdviceRow row = base;
  row.sampler = to_string(sampler);
  try {
    predict_row(row, f, e, form, in, exact, log_norm, sampler, opt, say);
  } catch (const Undefined& ex) {
    row = base;
    row.sampler = to_string(sampler);
    row.status = "not applicable";
    row.reason = ex.what();
  } catch (const std::exception& ex) {
    row = base;
    row.sampler = to_string(sampler);
    row.status = "failed";
    row.reason = ex.what();
  }
  return row;
}

// A row whose settling could change the decision: not settled, simulated, and its interval starts below every named M.
bool could_change(const AdviceRow& r, const std::vector<AdviceRow>& rows) {
  if (r.status != "ok" || r.decision != "not settled" || r.work_seconds <= 0) return false;
  for (const AdviceRow& o : rows)
    if (o.status == "ok" && o.m_p95 && o.m_p95 <= r.m_p95_low) return false;
  return true;
}

// What a row was predicted from, for the second pass of --time-budget (null where it was not predicted).
struct RowMaker {
  const Family* f = nullptr;
  const Estimator* e = nullptr;
  std::optional<ThreePointForm> form;
  Sampler sampler = Sampler::Iid;
  std::shared_ptr<SimulatedRun> run;  // its simulated draws (Inputs::run), resumed by the second pass
};

// The second pass of --time-budget: the rows whose open interval could change the decision, the cheapest to settle
// first (settle_seconds), each resumed from its draws so far with up to twice the further work projected to settle it
// (at least its work so far: one doubling round) while the budget lasts; only the further work is charged.
void settle_open_rows(Advice& a, std::vector<RowMaker>& of_row, Inputs& in, const ExactAttention& exact,
                      const arma::vec& log_norm, double work_left, const AdviseOptions& opt, const Say& say) {
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < a.rows.size(); ++i)
    if (of_row[i].e && could_change(a.rows[i], a.rows)) open.push_back(i);
  std::stable_sort(open.begin(), open.end(),
                   [&](std::size_t i, std::size_t j) { return a.rows[i].settle_seconds < a.rows[j].settle_seconds; });
  for (std::size_t i : open) {
    const double spent = a.rows[i].work_seconds * kWorkPerSecond;
    const double need = a.rows[i].settle_seconds * kWorkPerSecond - spent;
    if (need > work_left) break;
    if (!could_change(a.rows[i], a.rows)) continue;  // another row's M, settled meanwhile, is below its interval
    in.work_allowance = spent + std::min(work_left, std::max(2 * need, spent));  // at least a doubling round
    AdviceRow base;
    base.estimator = a.rows[i].estimator;
    RowMaker& m = of_row[i];
    say(fmt::format("settling {} ({}) further: it could change the decision", base.estimator, to_string(m.sampler)));
    in.run = &m.run;
    a.rows[i] = one_row(base, m.sampler, *m.f, *m.e, m.form, in, exact, log_norm, opt, say);
    in.run = nullptr;
    work_left -= a.rows[i].work_seconds * kWorkPerSecond - spent;
  }
}

// The options as this input uses them: with --pays-only the budget capped at paying_budget for its shapes.
AdviseOptions on_input(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& given) {
  AdviseOptions opt = given;
  if (!opt.pays_only) return opt;
  require(opt.quantity == AdviseQuantity::Attention,
          "--pays-only compares random features with exact attention: leave it out with --quantity kernel");
  const auto n = [](arma::uword x) { return static_cast<double>(x); };
  opt.budget = std::min(opt.budget,
                        paying_budget(n(Q.n_cols), n(K.n_cols), n(Q.n_rows), n(V.n_cols ? V.n_cols : 1), opt.causal));
  return opt;
}

Advice advise_on(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const HeadSequences* head,
                 const AdviseOptions& given, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& m) {
    if (progress) progress(m);
  };
  const AdviseOptions opt = on_input(Q, K, V, given);
  check_inputs(Q, K, V, opt);
  check_sums(V, opt);

  Advice a;
  Inputs in = prepare(a, Q, K, V, opt);
  // Exact attention on the sampled rows: Y, what the metric divides by, and the normalisers.
  const ExactAttention exact = exact_rows(in);
  if (opt.quantity == AdviseQuantity::Attention) in.norm = metric_norms(exact.Y, in, V, opt.metric, a.offset_share);
  const arma::vec log_norm = opt.quantity == AdviseQuantity::Kernel
                                 ? arma::vec(arma::max(log_kernel(opt.kernel, in.Qk.cols(in.rows), in.Kk), 1))
                                 : exact.log_normaliser;

  std::vector<Family> families;
  if (opt.estimators.empty())
    families = estimator_families();
  else
    for (const auto& n : opt.estimators) families.push_back(find_family(n));
  std::vector<std::unique_ptr<Estimator>> fitted;
  std::vector<RowMaker> of_row;
  // --time-budget: the first pass shares half of it by the rows in order (each may spend what is left of that half
  // over the rows still to come, so at least an equal share); the second pass spends what is left on the rows whose
  // open interval could change the decision (settle_open_rows).
  double work_left = opt.time_budget * kWorkPerSecond, first_left = work_left / 2;
  std::size_t rows_left = families.size() * opt.samplers.size();
  for (const Family& f : families) {
    AdviceRow base;
    base.estimator = f.name;
    if (!applicable(f, base)) {
      base.sampler = "any";
      a.rows.push_back(base);
      of_row.push_back({});
      rows_left -= opt.samplers.size();
      continue;
    }
    say("fitting " + f.name);
    std::unique_ptr<Estimator> e;
    try {
      e = make_estimator(f.name, in.Qk, in.Kk);
    } catch (const std::exception& ex) {
      base.sampler = "any";
      base.status = "failed";
      base.reason = std::string("fitting failed: ") + ex.what();
      a.rows.push_back(base);
      of_row.push_back({});
      fitted.push_back(nullptr);
      rows_left -= opt.samplers.size();
      continue;
    }
    std::optional<ThreePointForm> form;
    if (opt.quantity == AdviseQuantity::Attention) form = three_point_form(*e);
    for (Sampler sampler : opt.samplers) {
      in.work_allowance = first_left / static_cast<double>(rows_left--);
      of_row.push_back({&f, e.get(), form, sampler, nullptr});
      in.run = &of_row.back().run;
      a.rows.push_back(one_row(base, sampler, f, *e, form, in, exact, log_norm, opt, say));
      in.run = nullptr;
      first_left -= a.rows.back().work_seconds * kWorkPerSecond;
      work_left -= a.rows.back().work_seconds * kWorkPerSecond;
    }
    fitted.push_back(std::move(e));
  }
  settle_open_rows(a, of_row, in, exact, log_norm, work_left, opt, say);
  add_learned_rows(a, head, opt, say);
  cost_and_recommendation(a, in, fitted, say);
  emulate_sums(a, in, fitted, say);
  return a;
}

}  // namespace

Advice advise(const arma::mat& Q, const arma::mat& K, const arma::mat& V, const AdviseOptions& opt,
              const std::function<void(const std::string&)>& progress) {
  return advise_on(Q, K, V, nullptr, opt, progress);
}

Advice advise_sequences(const HeadSequences& head, const AdviseOptions& opt,
                        const std::function<void(const std::string&)>& progress) {
  require(!head.Q.empty() && head.K.size() == head.Q.size() && head.V.size() == head.Q.size(),
          "the sequences of a head need as many keys and values as queries: {} queries, {} keys, {} values",
          head.Q.size(), head.K.size(), head.V.size());
  return advise_on(head.Q.front(), head.K.front(), head.V.front(), &head, opt, progress);
}

}  // namespace kestrel
