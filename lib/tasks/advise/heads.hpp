// `kestrel advise` over the heads and layers of a model (issue "Attention as models run it", item 2): Q, K, V as
// [heads, L, d] or [layers, heads, L, d], each query head advised by the single-head advise (advise.hpp) with its own
// seed, in parallel, and one report: the rows of every head, and per estimator x sampler the M for every head and for
// the median head. Grouped-query attention (fewer key/value heads than query heads) reads kv head h / (Hq / Hkv).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <armadillo>
#include <nlohmann/json.hpp>

#include "tasks/advise/advise.hpp"

namespace kestrel {

// An array of tokens as stored in C order: shape has 2 to 4 axes ([L, d], [heads, L, d], [layers, heads, L, d]; 5 with
// a sequences axis first, for stack_sequences);
// data is shape.back() x (the product of the others), so stack s (C order over the leading axes) is columns
// [s * L, (s + 1) * L): exactly a .npy file's or a C-contiguous NumPy array's memory.
struct TokenArray {
  std::vector<arma::uword> shape;
  arma::mat data;
};

// The inputs per head. Query head (l, h) is Q[l * q_heads + h]; it reads key/value head kv = h / (q_heads / kv_heads),
// K[l * kv_heads + kv] and V[l * kv_heads + kv] (V empty: the normalisers).
// Sequences (stack_sequences): Q, K, V hold sequence s's heads from index s * layers * heads on (sequence 0 first).
struct HeadStack {
  arma::uword layers = 1, q_heads = 1, kv_heads = 1, sequences = 1;
  bool layered = false;            // the input had a layer axis
  std::vector<arma::mat> Q, K, V;  // d x Lq, d x Lk, Lk x dv
  arma::uword kv_of(arma::uword head) const { return head / (q_heads / kv_heads); }
};

// Q, K (and V unless null) with the same number of axes (3 or 4), the same layers, d (Q, K) and L (K, V); K and V with
// the same number of heads, which divides Q's. names: how the caller calls them ("--queries", "--keys", "--values").
// Throws InvalidArgument naming the values and the fix.
HeadStack stack_heads(const TokenArray& Q, const TokenArray& K, const TokenArray* V,
                      const std::array<std::string, 3>& names);

// Sequences of the heads (--learned: the map is fitted on some sequences and judged on the others): Q, K, V as
// [sequences, L, d], [sequences, heads, L, d] or [sequences, layers, heads, L, d] (V: dv for d) with the same number of
// sequences, each sequence checked as stack_heads checks a stack; V is needed (the error is of attention rows). The
// stack holds every sequence (HeadStack::sequences). Throws InvalidArgument naming the values.
HeadStack stack_sequences(const TokenArray& Q, const TokenArray& K, const TokenArray* V,
                          const std::array<std::string, 3>& names);
// Query head i's (layer-major) sequences with its key/value head's keys and values; the values unit-scaled as one array
// (unit_scaled_values: every sequence of the head by the same power of two).
struct HeadSequences;
HeadSequences head_sequences(const HeadStack& in, std::size_t i);

// The seed of head (layer, head): the seed itself for (0, 0), so that a one-head stack is the 2-D run; a SplitMix64
// mix of (seed, layer, head) below 2^63 (a valid --seed) otherwise. It depends on neither the number of heads nor the
// threads.
std::uint64_t head_seed(std::uint64_t seed, arma::uword layer, arma::uword head);

struct HeadAdvice {
  arma::uword layer = 0, head = 0, kv_head = 0;
  std::uint64_t seed = 0;
  Advice advice;  // its rows carry layer, head and kv_head
};

// One estimator x sampler over the heads.
struct HeadsSummary {
  std::string estimator, sampler;
  std::string status = "ok", reason;  // not ok: some head's row is not (the first such head named)
  // Every head: "M" (m_every is the largest M named), else "out of reach" if any head is, else "not settled".
  std::string decision_every;
  arma::uword m_every = 0;
  // The median head: heads ordered by their M (out of reach and not settled above any M), the one at rank
  // ceil(H / 2): the smallest M that meets the target on at least half of the heads.
  std::string decision_median;
  arma::uword m_median = 0;
  arma::uword heads_named = 0;      // heads whose decision is M
  double pays_from_length = 0;      // M for every head: the L from which it costs fewer FLOPs than exact attention
  std::vector<arma::uword> m_each;  // per head (layer-major), 0 where no M is named
  std::vector<std::string> decision_each;
};

// A share of a model's layers (a Slurm job-array task's, `kestrel advise --shard K/N`): layers l with l mod count =
// index. Each head's advice depends on its own inputs and head_seed only, so the parts of any split merge into the
// report of the whole stack (merge_heads).
struct LayerShard {
  arma::uword index = 0, count = 1;
  bool has(arma::uword layer) const { return layer % count == index; }
};

struct HeadsAdvice;
// The summary's columns (heads_report.cpp): its JSON, the HDF5 attributes of /advise/summary/<estimator>/<sampler> and
// the command line's summary table are written from this table (io/record.hpp).
using SummaryColumn = Column<HeadsSummary, HeadsAdvice>;
const std::vector<SummaryColumn>& summary_columns();

struct HeadsAdvice {
  AdviseOptions options;
  arma::uword layers = 1, q_heads = 1, kv_heads = 1;
  bool layered = false;
  std::vector<HeadAdvice> heads;  // layer-major
  std::vector<HeadsSummary> summary;
  std::optional<std::size_t> best;  // the summary entry with the smallest M for every head
  // At the input's L (Advice::choice): the recommended row at its M for every head against exact attention,
  // "random features", "learned features" or "exact softmax"; without a recommended row "exact softmax" where every
  // head's own choice is, else "per head" (each head's Advice::choice says).
  std::string choice;
  std::string recommendation;
  std::string grouped_query;  // "" or what grouped-query attention means here
  // A part (advise_heads with a shard of count > 1): the heads of the shard's layers only, and no summary (summary
  // empty, choice and recommendation say so); merge_heads makes the whole report from the parts.
  std::optional<LayerShard> shard;
  std::vector<arma::uword> shard_layers;  // the part's layers, ascending
};

// Each head's advise() (its V through unit_scaled_values, as the single-head callers do; with opt.learned,
// advise_sequences on head_sequences), in parallel over the heads (each with head_seed), then the summary. Results are
// identical for any thread count. An error of one head is rethrown naming it (the first head in order that failed).
// With opt.timing, attention is timed on layer 0 head 0 only (the heads have the same shapes).
// With a shard of count > 1, only the heads of its layers (a part, HeadsAdvice::shard); attention is timed on layer 0
// head 0 in whichever part has it.
HeadsAdvice advise_heads(const HeadStack& in, const AdviseOptions& opt,
                         const std::function<void(const std::string&)>& progress = {}, const LayerShard& shard = {});

// The summary per estimator x sampler over a.heads, the best entry, the choice and the recommendation (advise_heads
// and merge_heads): from each head's rows (status, reason, decision, m_p95), choice, shapes and exact-attention cost.
void summarise_heads(HeadsAdvice& a);

// The report of a whole stack from its parts' report.json (to_json of each part, any order, any split): every layer
// exactly once, the same options, inputs and budget. The heads' rows and reports are the parts' as they are; the
// summary, best row, choice and recommendation are computed as advise_heads computes them, from the heads' decisions,
// M, choices and costs (the fields of `advice` it reads; the rest of each head is in `report`). Throws InvalidArgument
// naming the part and the fix where parts disagree, Incomplete naming the layers no part has.
struct MergedHeads {
  HeadsAdvice advice;
  nlohmann::json report;  // to_json of the whole stack: what one process writes
};
// options: the parts' recorded options as the summary reads them (the caller parses them: frontend/advise_options.hpp).
MergedHeads merge_heads(const std::vector<nlohmann::json>& parts, const std::vector<std::string>& names,
                        const AdviseOptions& options);

// "estimator" for iid, "estimator (sampler)" otherwise: a summary row's name in the report.
std::string summary_label(const HeadsSummary& s);
nlohmann::json to_json(const HeadsAdvice& a, const nlohmann::json& options);  // options: as to_json(Advice)
// The report around its rows and heads (each head's report without its rows): what to_json makes of a.heads, and what
// merge_heads makes of the parts' rows and heads. A part adds "shard" (index, count, layers).
nlohmann::json heads_json(const HeadsAdvice& a, const nlohmann::json& options, nlohmann::json rows,
                          nlohmann::json heads);
inline Output output_kind(const HeadsAdvice& a) { return a.shard ? Output::AdvisePart : Output::AdviseHeads; }
void write_table(std::ostream& out, const HeadsAdvice& a);
// Its summary part: the summary per estimator x sampler, the cost per head and the recommendation.
void write_summary_table(std::ostream& out, const HeadsAdvice& a);
// The HDF5 report: /advise/report.json, the summary and the heat map of the recommended row, and per head the groups
// /advise/layer<l>/head<h>/<estimator>/<sampler> as write_report(Advice) writes them.
void write_report(H5Writer& h5, const HeadsAdvice& a, const nlohmann::json& options);
// All of it but the heads' groups, with `report` as /advise/report.json (a merged report copies the heads' groups from
// its parts).
void write_summary_report(H5Writer& h5, const HeadsAdvice& a, const nlohmann::json& report);

}  // namespace kestrel
