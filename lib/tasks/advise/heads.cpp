// `kestrel advise` over heads and layers (heads.hpp): the shapes checked once, each query head advised by advise() with
// its own seed (in parallel over heads, each head's result written to its own slot) and the summary per estimator x
// sampler; heads_report.cpp writes the report.
#include "tasks/advise/heads.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tbb/parallel_for.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/hdf5.hpp"
#include "tasks/advise/steps.hpp"
#include "tasks/learned_attention.hpp"

namespace kestrel {

namespace {

std::string shape_text(const std::vector<arma::uword>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

const char* axes_text(std::size_t n) { return n == 4 ? "[layers, heads, L, d]" : n == 3 ? "[heads, L, d]" : "[L, d]"; }

// Head s (C order over the leading axes) of a token array: its L x d slice as d x L.
arma::mat slice(const TokenArray& a, arma::uword s) {
  const arma::uword L = a.shape[a.shape.size() - 2];
  return a.data.cols(s * L, (s + 1) * L - 1);
}

std::string row_key(const AdviceRow& r) { return r.estimator + "\n" + r.sampler; }

// Every input needs n axes. The one that differs is named: the values when queries and keys agree (a stack of values
// beside 2-D queries and keys), otherwise the keys against the queries.
void check_axes(const TokenArray& Q, const TokenArray& K, const TokenArray* V, const std::array<std::string, 3>& names,
                std::size_t n) {
  const auto& [qn, kn, vn] = names;
  if (V && Q.shape.size() == K.shape.size() && V->shape.size() != Q.shape.size())
    throw InvalidArgument(fmt::format(
        "{} has the shape {} but {} has {} and {} has {}: give all of them as {}, or {} with {} axes as they are", vn,
        shape_text(V->shape), qn, shape_text(Q.shape), kn, shape_text(K.shape), axes_text(n), vn, Q.shape.size()));
  for (const TokenArray* a : {&K, V})
    if (a && (a->shape.size() != n || Q.shape.size() != n))
      throw InvalidArgument(fmt::format("{} has the shape {} but {} has {}: give all of them as {}", a == &K ? kn : vn,
                                        shape_text(a->shape), qn, shape_text(Q.shape), axes_text(n)));
}

}  // namespace

HeadStack stack_heads(const TokenArray& Q, const TokenArray& K, const TokenArray* V,
                      const std::array<std::string, 3>& names) {
  const auto& [qn, kn, vn] = names;
  std::size_t n = std::max(Q.shape.size(), K.shape.size());
  if (V) n = std::max(n, V->shape.size());
  const auto inputs = {std::pair{&Q, &qn}, std::pair{&K, &kn}, std::pair{V, &vn}};
  for (const auto& [a, name] : inputs)
    if (a && a->shape.size() == n)
      require(n == 3 || n == 4,
              "{}: expected [L, d], [heads, L, d] or [layers, heads, L, d] (learned maps: a sequences axis first), got "
              "{} axes {}",
              *name, n, shape_text(a->shape));
  for (const auto& [a, name] : inputs)
    if (a)
      require(std::find(a->shape.begin(), a->shape.end(), 0) == a->shape.end(), "{} has the shape {}: an axis is empty",
              *name, shape_text(a->shape));
  check_axes(Q, K, V, names, n);
  for (const auto& [a, name] : inputs) {
    if (!a || a == &Q) continue;
    require(n == 3 || a->shape[0] == Q.shape[0],
            "{} has {} layers but {} has {}: give every input the same layers (shapes {} and {})", *name, a->shape[0],
            qn, Q.shape[0], shape_text(a->shape), shape_text(Q.shape));
  }
  const std::size_t h = n - 3;  // the heads axis
  const arma::uword Hq = Q.shape[h], Hkv = K.shape[h];
  require(K.shape.back() == Q.shape.back(), "{} has d = {} but {} has d = {}: queries and keys need the same d", kn,
          K.shape.back(), qn, Q.shape.back());
  if (V) {
    require(V->shape[h] == Hkv, "{} has {} heads but {} has {}: values and keys need the same heads", vn, V->shape[h],
            kn, Hkv);
    require(V->shape[n - 2] == K.shape[n - 2], "{} has L = {} tokens per head but {} has L = {}: one value per key", vn,
            V->shape[n - 2], kn, K.shape[n - 2]);
  }
  require(Hkv >= 1 && Hq >= 1 && Hq % Hkv == 0,
          "{} has {} heads, which does not divide the {} query heads of {}: grouped-query attention needs query heads "
          "= a multiple of key/value heads (shapes {} and {})",
          kn, Hkv, Hq, qn, shape_text(K.shape), shape_text(Q.shape));
  HeadStack s;
  s.layered = n == 4;
  s.layers = s.layered ? Q.shape[0] : 1;
  s.q_heads = Hq;
  s.kv_heads = Hkv;
  for (arma::uword i = 0; i < s.layers * Hq; ++i) s.Q.push_back(slice(Q, i));
  for (arma::uword i = 0; i < s.layers * Hkv; ++i) {
    s.K.push_back(slice(K, i));
    if (V) s.V.push_back(slice(*V, i).t());
  }
  return s;
}

HeadStack stack_sequences(const TokenArray& Q, const TokenArray& K, const TokenArray* V,
                          const std::array<std::string, 3>& names) {
  const auto& [nq, nk, nv] = names;
  require(V, "learned maps are judged by the error of attention rows: give {} too", nv);
  for (const auto& [a, n] : {std::pair{&Q, &nq}, std::pair{&K, &nk}, std::pair{V, &nv}})
    require(a->shape.size() >= 3 && a->shape.size() <= 5,
            "{}: learned maps need sequences as [sequences, L, d], [sequences, heads, L, d] or [sequences, layers, "
            "heads, L, d], got {}",
            *n, shape_text(a->shape));
  const arma::uword S = Q.shape[0];
  require(K.shape[0] == S && V->shape[0] == S, "{}, {} and {} need the same number of sequences, got {}, {} and {}", nq,
          nk, nv, S, K.shape[0], V->shape[0]);
  // Sequence s of an array: its axes after the first ([L, d] as one head, [1, L, d]), its columns the s-th S-th part.
  const auto part = [S](const TokenArray& a, arma::uword s) {
    TokenArray t{{a.shape.begin() + 1, a.shape.end()}, {}};
    if (t.shape.size() == 2) t.shape.insert(t.shape.begin(), 1);
    const arma::uword n = a.data.n_cols / S;
    t.data = a.data.cols(s * n, (s + 1) * n - 1);
    return t;
  };
  HeadStack out;
  for (arma::uword s = 0; s < S; ++s) {
    const TokenArray v = part(*V, s);
    HeadStack one = stack_heads(part(Q, s), part(K, s), &v, names);
    if (s == 0) {
      out = std::move(one);
      continue;
    }
    for (auto [to, from] : {std::pair{&out.Q, &one.Q}, std::pair{&out.K, &one.K}, std::pair{&out.V, &one.V}})
      to->insert(to->end(), from->begin(), from->end());
  }
  out.sequences = S;
  return out;
}

HeadSequences head_sequences(const HeadStack& in, std::size_t i) {
  const std::size_t heads = in.layers * in.q_heads, kv_heads = in.layers * in.kv_heads;
  const std::size_t kv = (i / in.q_heads) * in.kv_heads + in.kv_of(i % in.q_heads);
  require(!in.V.empty(), "learned maps are judged by the error of attention rows: give the values too");
  std::vector<arma::mat> rows;
  for (arma::uword s = 0; s < in.sequences; ++s) rows.push_back(in.V[s * kv_heads + kv]);
  arma::mat all;  // one scale for every sequence of the head: (sum Lk) x dv
  for (const arma::mat& v : rows) all = arma::join_cols(all, v);
  all = unit_scaled_values(all);
  HeadSequences h;
  arma::uword at = 0;
  for (arma::uword s = 0; s < in.sequences; ++s) {
    h.Q.push_back(in.Q[s * heads + i]);
    h.K.push_back(in.K[s * kv_heads + kv]);
    h.V.push_back(all.rows(at, at + rows[s].n_rows - 1));
    at += rows[s].n_rows;
  }
  return h;
}

std::uint64_t head_seed(std::uint64_t seed, arma::uword layer, arma::uword head) {
  if (layer == 0 && head == 0) return seed;
  return mix64(mix64(seed) ^ mix64((static_cast<std::uint64_t>(layer) << 32) ^ head)) >> 1;
}

namespace {

// The summary of one estimator x sampler over the heads' rows (nullptr: the head has no such row).
HeadsSummary summarise(const std::string& estimator, const std::string& sampler,
                       const std::vector<const AdviceRow*>& rows, const std::vector<HeadAdvice>& heads) {
  HeadsSummary s{.estimator = estimator, .sampler = sampler};
  std::vector<std::pair<arma::uword, std::string>> order;  // (M or max for none, decision)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const AdviceRow* r = rows[i];
    if (!r || r->status != "ok") {
      if (s.status == "ok") {
        s.status = r ? r->status : "failed";
        s.reason = fmt::format("layer {} head {}: {}", heads[i].layer, heads[i].head, r ? r->reason : "no row");
      }
      s.m_each.push_back(0);
      s.decision_each.push_back(r ? r->status : "failed");
      continue;
    }
    const bool named = r->decision == "M";
    s.m_each.push_back(named ? r->m_p95 : 0);
    s.decision_each.push_back(r->decision);
    s.heads_named += named;
    // Not settled ranks below out of reach: its M may still be within the budget.
    order.emplace_back(named ? r->m_p95 : r->decision == "not settled" ? UINT64_MAX - 1 : UINT64_MAX, r->decision);
  }
  if (s.status != "ok") return s;
  const auto any = [&](const char* d) {
    return std::find(s.decision_each.begin(), s.decision_each.end(), d) != s.decision_each.end();
  };
  s.decision_every = any("out of reach") ? "out of reach" : any("not settled") ? "not settled" : "M";
  if (s.decision_every == "M") {
    s.m_every = *std::max_element(s.m_each.begin(), s.m_each.end());
    s.pays_from_length =
        advise_steps::crossover_length(static_cast<double>(s.m_every), heads.front().advice.options.causal);
  }
  std::sort(order.begin(), order.end());
  const auto& median = order[(order.size() - 1) / 2];
  s.decision_median = median.second;
  s.m_median = median.second == "M" ? median.first : 0;
  return s;
}

std::string heads_words(HeadsAdvice& a);

}  // namespace

void summarise_heads(HeadsAdvice& a) {
  std::vector<std::pair<std::string, std::string>> keys;  // in the order of first appearance over the heads
  std::vector<std::map<std::string, const AdviceRow*>> by_head(a.heads.size());
  for (std::size_t i = 0; i < a.heads.size(); ++i)
    for (const auto& r : a.heads[i].advice.rows) {
      by_head[i][row_key(r)] = &r;
      if (std::find(keys.begin(), keys.end(), std::pair{r.estimator, r.sampler}) == keys.end())
        keys.emplace_back(r.estimator, r.sampler);
    }
  for (const auto& [estimator, sampler] : keys) {
    if (sampler == "any") continue;  // not applicable or not fitted on a head: said by that head's rows
    std::vector<const AdviceRow*> rows;
    for (std::size_t i = 0; i < a.heads.size(); ++i) {
      const auto& m = by_head[i];
      auto it = m.find(estimator + "\n" + sampler);
      if (it == m.end()) it = m.find(estimator + "\nany");  // fitting failed on this head
      rows.push_back(it == m.end() ? nullptr : it->second);
    }
    a.summary.push_back(summarise(estimator, sampler, rows, a.heads));
  }
  for (std::size_t k = 0; k < a.summary.size(); ++k) {
    const auto& s = a.summary[k];
    if (s.status != "ok" || s.decision_every != "M") continue;
    if (!a.best ||
        std::pair{s.m_every, s.m_median} < std::pair{a.summary[*a.best].m_every, a.summary[*a.best].m_median})
      a.best = k;
  }
  a.recommendation = heads_words(a);
}

namespace {

// The recommended row at its M for every head against exact attention at the input's L (by FLOPs, as for one head).
std::string exact_words(HeadsAdvice& a, const HeadsSummary& s) {
  const Advice& first = a.heads.front().advice;
  const AdviceCost& c = first.cost;
  const double rf = advise_steps::rf_attention_flops(
      static_cast<double>(first.Lq), static_cast<double>(first.Lk), static_cast<double>(first.d),
      static_cast<double>(first.dv ? first.dv : 1), static_cast<double>(s.m_every));
  const bool pays = rf < c.exact_flops;
  const std::string kind = s.sampler == "learned" ? "learned features" : "random features";
  a.choice = pays ? kind : "exact softmax";
  return fmt::format(
      " At L = {}{}, exact softmax attention costs {:.3g} GFLOP per head against {:.3g} at M = {}{} ({} at this M "
      "cost fewer FLOPs from L > {:.0f}).",
      first.Lk, c.causal ? ", causal" : "", c.exact_flops / 1e9, rf / 1e9, s.m_every,
      pays ? "" : ": keep exact softmax attention on every head", kind, s.pays_from_length);
}

// Each head's own choice (its fewest M against exact attention), counted.
std::string per_head_words(const HeadsAdvice& a) {
  std::map<std::string, std::size_t> n;
  for (const auto& h : a.heads) ++n[h.advice.choice];
  std::vector<std::string> parts;
  for (const auto& [choice, k] : n) parts.push_back(fmt::format("{} on {}", choice, k));
  return fmt::format(" Head by head, each at its own fewest M: {} of the {} heads.", fmt::join(parts, ", "),
                     a.heads.size());
}

std::string heads_words(HeadsAdvice& a) {
  const std::size_t H = a.heads.size();
  const bool attention = a.options.quantity == AdviseQuantity::Attention;
  std::string s;
  if (a.best) {
    const auto& b = a.summary[*a.best];
    s = fmt::format(
        "{} with M = {} meets the target ({}% of the {}) on all {} heads (the median head needs M = {}; per head: "
        "the rows above).",
        summary_label(b), b.m_every, 100 * a.options.target, a.options.metric == AdviseMetric::Tv ? "tv" : "error", H,
        b.m_median);
    if (attention)
      s += exact_words(a, b);
    else
      a.choice = "random features";
  } else {
    s = fmt::format(
        "No estimator x sampler meets the target on all {} heads within the budget of {} features{} (see the "
        "summary: the median head's M and each head's decision).",
        H, a.options.budget,
        a.options.pays_only ? fmt::format(", where random features pay at L = {}", a.heads.front().advice.Lk) : "");
    const bool all_exact = std::all_of(a.heads.begin(), a.heads.end(),
                                       [](const HeadAdvice& h) { return h.advice.choice == "exact softmax"; });
    a.choice = attention && all_exact ? "exact softmax" : "per head";
  }
  if (!attention) return s;
  return s + per_head_words(a);
}

}  // namespace

std::string summary_label(const HeadsSummary& s) {
  return s.sampler == "iid" ? s.estimator : s.estimator + " (" + s.sampler + ")";
}

HeadsAdvice advise_heads(const HeadStack& in, const AdviseOptions& opt,
                         const std::function<void(const std::string&)>& progress, const LayerShard& shard) {
  HeadsAdvice a;
  a.options = opt;
  a.layers = in.layers;
  a.q_heads = in.q_heads;
  a.kv_heads = in.kv_heads;
  a.layered = in.layered;
  if (in.kv_heads < in.q_heads)
    a.grouped_query = fmt::format(
        "grouped-query attention: {} query heads share {} key/value heads, {} each (query head h reads key/value "
        "head h / {})",
        in.q_heads, in.kv_heads, in.q_heads / in.kv_heads, in.q_heads / in.kv_heads);
  std::vector<std::size_t> index;  // the query heads advised here (all but in a part), layer-major
  for (std::size_t i = 0; i < in.layers * in.q_heads; ++i)
    if (shard.has(i / in.q_heads)) index.push_back(i);
  const std::size_t n = index.size();
  a.heads.resize(n);
  std::vector<std::exception_ptr> errors(n);
  std::mutex say_mu;
  tbb::parallel_for(std::size_t{0}, n, [&](std::size_t k) {
    HeadAdvice& h = a.heads[k];
    const std::size_t i = index[k];
    h.layer = i / in.q_heads;
    h.head = i % in.q_heads;
    h.kv_head = in.kv_of(h.head);
    h.seed = head_seed(opt.seed, h.layer, h.head);
    const std::size_t kv = h.layer * in.kv_heads + h.kv_head;
    const std::string who = fmt::format("layer {} head {}", h.layer, h.head);
    AdviseOptions o = opt;
    o.seed = h.seed;
    // Attention is timed once, on layer 0 head 0 (every head has the same shapes), not by heads timing each other.
    o.timing = opt.timing && i == 0;  // in whichever part has it
    const auto say = [&](const std::string& m) {
      if (!progress) return;
      const std::lock_guard<std::mutex> lock(say_mu);
      progress(who + ": " + m);
    };
    try {  // with learned maps, the random rows on sequence 0 and the maps fitted and judged over the sequences
      h.advice = o.learned.empty()
                     ? advise(in.Q[i], in.K[kv], in.V.empty() ? arma::mat() : unit_scaled_values(in.V[kv]), o, say)
                     : advise_sequences(head_sequences(in, i), o, say);
    } catch (...) {
      errors[k] = std::current_exception();
      return;
    }
    for (auto& r : h.advice.rows) r.layer = h.layer, r.head = h.head, r.kv_head = h.kv_head;
  });
  for (std::size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    const std::string who = fmt::format("layer {} head {}: ", a.heads[i].layer, a.heads[i].head);
    try {
      std::rethrow_exception(errors[i]);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(who + e.what());
    } catch (const NumericalError& e) {
      throw NumericalError(who + e.what());
    }
  }
  if (n) a.options.budget = a.heads.front().advice.options.budget;  // as the heads used it (--pays-only: capped)
  if (shard.count == 1) {
    summarise_heads(a);
    return a;
  }
  a.shard = shard;
  for (arma::uword l = shard.index; l < in.layers; l += shard.count) a.shard_layers.push_back(l);
  a.choice = "part";
  a.recommendation = fmt::format(
      "part {} of {} (layers {}): no summary until every part is there; kestrel advise merge OUT.h5 writes the "
      "whole report",
      shard.index, shard.count, fmt::join(a.shard_layers, ", "));
  return a;
}

}  // namespace kestrel
