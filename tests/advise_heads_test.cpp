// `kestrel advise` over heads and layers (tasks/advise/heads.hpp): a one-head stack is the 2-D run, each head of a
// stack is the single-head run with its derived seed (bit for bit, for any thread count and any number of heads run
// together), grouped-query heads read their key/value head, the summary over the heads, the report's columns and files,
// and shapes that do not fit are refused naming the values. No statistics: every comparison is exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <oneapi/tbb/global_control.h>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "frontend/advise_options.hpp"
#include "io/hdf5.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/advise/steps.hpp"
#include "test_util.hpp"

namespace kestrel {
namespace {

AdviseOptions quick() {
  AdviseOptions o;
  o.estimators = {"pos", "oprf"};
  o.samplers = {Sampler::Iid};
  o.timing = false;
  o.budget = 1024;
  o.draws = 16;
  o.max_draws = 64;
  o.rows = 24;
  o.seed = 7;
  return o;
}

// n heads of d x L tokens (seeds from `seed`), as a [heads, L, d] array, or [layers, heads, L, d] when layers > 0.
struct Heads {
  std::vector<arma::mat> m;
  TokenArray array;
};
Heads heads(arma::uword n, arma::uword d, arma::uword L, double scale, std::uint64_t seed, arma::uword layers = 0) {
  Heads h;
  h.array.shape = layers ? std::vector<arma::uword>{layers, n / layers, L, d} : std::vector<arma::uword>{n, L, d};
  h.array.data.set_size(d, n * L);
  for (arma::uword i = 0; i < n; ++i) {
    h.m.push_back(test::points(d, L, scale, seed + i));
    h.array.data.cols(i * L, (i + 1) * L - 1) = h.m.back();
  }
  return h;
}

// A report's JSON without the stacked columns, to compare a head's rows with a 2-D run's.
std::string without_head(nlohmann::json j) {
  for (auto& r : j.at("rows")) r.erase("layer"), r.erase("head"), r.erase("kv_head");
  return j.dump();
}

const std::array<std::string, 3> kNames = {"Q", "K", "V"};

TEST(AdviseHeads, OneHeadStackIsTheTwoDimensionalRun) {
  const Heads q = heads(1, 8, 40, 0.4, 61), k = heads(1, 8, 50, 0.4, 62), v = heads(1, 3, 50, 1.0, 63);
  const AdviseOptions o = quick();
  const HeadsAdvice h = advise_heads(stack_heads(q.array, k.array, &v.array, kNames), o);
  ASSERT_EQ(h.heads.size(), 1u);
  EXPECT_EQ(h.heads[0].seed, o.seed);
  const Advice plain = advise(q.m[0], k.m[0], unit_scaled_values(v.m[0].t()), o);
  EXPECT_EQ(without_head(to_json(h.heads[0].advice, nullptr)), to_json(plain, nullptr).dump());
  ASSERT_FALSE(plain.rows.empty());
  EXPECT_EQ(h.heads[0].advice.rows[0].curve_p95, plain.rows[0].curve_p95);
  // One head: the summary is the head's own decision.
  for (const auto& s : h.summary) {
    const auto r = std::find_if(plain.rows.begin(), plain.rows.end(), [&](const AdviceRow& x) {
      return x.estimator == s.estimator && x.sampler == s.sampler;
    });
    ASSERT_NE(r, plain.rows.end());
    EXPECT_EQ(s.decision_every, r->decision);
    EXPECT_EQ(s.m_every, r->decision == "M" ? r->m_p95 : 0);
    EXPECT_EQ(s.m_median, s.m_every);
  }
}

// Two query heads sharing one key/value head (grouped-query attention): each equals the single-head run on its own
// queries and the shared keys with head_seed, bit for bit; with one thread and with two.
TEST(AdviseHeads, EachHeadIsTheSingleHeadRunWithItsDerivedSeed) {
  const Heads q = heads(2, 8, 40, 0.4, 71), k = heads(1, 8, 50, 0.4, 81), v = heads(1, 3, 50, 1.0, 91);
  const AdviseOptions o = quick();
  const HeadStack stack = stack_heads(q.array, k.array, &v.array, kNames);
  EXPECT_EQ(stack.kv_heads, 1u);
  std::vector<std::string> runs;
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    runs.push_back(to_json(advise_heads(stack, o), record_advise(o)).dump());
  }
  EXPECT_EQ(runs[0], runs[1]);
  const HeadsAdvice h = advise_heads(stack, o);
  EXPECT_NE(h.grouped_query.find("2 query heads share 1 key/value heads"), std::string::npos) << h.grouped_query;
  EXPECT_NE(head_seed(o.seed, 0, 1), o.seed);
  for (arma::uword i = 0; i < 2; ++i) {
    AdviseOptions oi = o;
    oi.seed = head_seed(o.seed, 0, i);
    EXPECT_EQ(h.heads[i].seed, oi.seed);
    EXPECT_EQ(h.heads[i].kv_head, 0u);
    const Advice alone = advise(q.m[i], k.m[0], unit_scaled_values(v.m[0].t()), oi);
    EXPECT_EQ(without_head(to_json(h.heads[i].advice, nullptr)), to_json(alone, nullptr).dump()) << "head " << i;
    for (const auto& r : h.heads[i].advice.rows) EXPECT_EQ(r.head, std::optional<arma::uword>(i));
  }
  // Different queries, different curves: the heads are not one run repeated.
  EXPECT_NE(h.heads[0].advice.rows[0].curve_p95, h.heads[1].advice.rows[0].curve_p95);
}

// A head's result does not depend on the other heads: head (1, 0) of a 2 x 1 stack is head (1, 0) of a 2 x 2 stack with
// the same inputs for it; 4-D shapes and grouped-query heads per layer.
TEST(AdviseHeads, AHeadIsTheSameWhateverHeadsRunWithIt) {
  const AdviseOptions o = quick();
  const Heads q4 = heads(4, 8, 32, 0.4, 101, 2), k4 = heads(2, 8, 32, 0.4, 201, 2);
  const HeadsAdvice h4 = advise_heads(stack_heads(q4.array, k4.array, nullptr, kNames), o);
  ASSERT_EQ(h4.heads.size(), 4u);
  EXPECT_EQ(h4.layers, 2u);
  EXPECT_TRUE(h4.layered);
  // Layer 1 head 0 (query index 2) reads key head (1, 0) (key index 1).
  Heads q2 = heads(2, 8, 32, 0.4, 101, 2);
  q2.array.data.cols(32, 63) = q4.m[2];  // [2, 1, 32, 8]: layer 1's only head is q4's layer 1 head 0
  q2.array.shape = {2, 1, 32, 8};
  const HeadsAdvice h2 = advise_heads(stack_heads(q2.array, k4.array, nullptr, kNames), o);
  ASSERT_EQ(h2.heads.size(), 2u);
  EXPECT_EQ(h2.heads[1].layer, 1u);
  EXPECT_EQ(h2.heads[1].head, 0u);
  EXPECT_EQ(to_json(h2.heads[1].advice, nullptr).dump(), to_json(h4.heads[2].advice, nullptr).dump());
  EXPECT_EQ(h4.heads[2].seed, head_seed(o.seed, 1, 0));

  // The summary is read off the heads' rows: every head's M, the largest for every head, the ceil(H/2)-th smallest for
  // the median head.
  for (const auto& s : h4.summary) {
    ASSERT_EQ(s.status, "ok") << s.reason;
    ASSERT_EQ(s.m_each.size(), 4u);
    std::vector<arma::uword> named;
    for (std::size_t i = 0; i < 4; ++i) {
      const auto& rows = h4.heads[i].advice.rows;
      const auto r = std::find_if(rows.begin(), rows.end(), [&](const AdviceRow& x) {
        return x.estimator == s.estimator && x.sampler == s.sampler;
      });
      ASSERT_NE(r, rows.end());
      EXPECT_EQ(s.decision_each[i], r->decision);
      EXPECT_EQ(s.m_each[i], r->decision == "M" ? r->m_p95 : 0);
      if (r->decision == "M") named.push_back(r->m_p95);
    }
    EXPECT_EQ(s.heads_named, named.size());
    if (named.size() == 4) {
      std::sort(named.begin(), named.end());
      EXPECT_EQ(s.decision_every, "M");
      EXPECT_EQ(s.m_every, named[3]);
      EXPECT_EQ(s.m_median, named[1]);
    } else {
      EXPECT_NE(s.decision_every, "M");
      EXPECT_EQ(s.m_every, 0u);
    }
  }
  EXPECT_TRUE(h4.best.has_value());
}

// A target no head reaches within the budget: every head and the median head are out of reach, nothing recommended.
TEST(AdviseHeads, OutOfReachOnAnyHeadIsOutOfReachForEvery) {
  AdviseOptions o = quick();
  o.budget = 4;
  o.target = 0.001;
  const Heads q = heads(2, 8, 32, 0.4, 301), k = heads(2, 8, 32, 0.4, 401);
  const HeadsAdvice h = advise_heads(stack_heads(q.array, k.array, nullptr, kNames), o);
  ASSERT_FALSE(h.summary.empty());
  for (const auto& s : h.summary) {
    EXPECT_EQ(s.decision_every, "out of reach");
    EXPECT_EQ(s.decision_median, "out of reach");
    EXPECT_EQ(s.m_every, 0u);
    EXPECT_EQ(s.heads_named, 0u);
  }
  EXPECT_FALSE(h.best.has_value());
  EXPECT_NE(h.recommendation.find("No estimator x sampler meets the target on all 2 heads"), std::string::npos);
  EXPECT_EQ(h.choice, "exact softmax") << "every head out of reach keeps exact attention";
  EXPECT_NE(h.recommendation.find("exact softmax on 2 of the 2 heads"), std::string::npos) << h.recommendation;
}

TEST(AdviseHeads, PaysOnlyCapsEveryHeadAtWhereRandomFeaturesPay) {
  // --pays-only on a stack: every head's budget, and the stack's, is the M where random features stop paying at its L
  // (here 15 at L = 32); no curve goes beyond it, and the words say where the budget came from.
  AdviseOptions o = quick();
  o.target = 0.001;
  o.pays_only = true;
  const Heads q = heads(2, 8, 32, 0.4, 301), k = heads(2, 8, 32, 0.4, 401);
  const HeadsAdvice h = advise_heads(stack_heads(q.array, k.array, nullptr, kNames), o);
  const arma::uword cap = advise_steps::paying_budget(32, 32, 8, 1, false);
  ASSERT_EQ(cap, 15u);
  EXPECT_EQ(h.options.budget, cap);
  for (const auto& head : h.heads) {
    EXPECT_EQ(head.advice.options.budget, cap);
    for (const auto& r : head.advice.rows)
      if (r.status == "ok") EXPECT_LE(r.curve_m.back(), static_cast<double>(cap)) << r.estimator;
  }
  EXPECT_NE(h.recommendation.find("within the budget of 15 features, where random features pay at L = 32"),
            std::string::npos)
      << h.recommendation;
  EXPECT_EQ(h.choice, "exact softmax") << h.recommendation;
}

// The report: JSON rows of every head with layer, head and kv_head from the column table; the summary; the HDF5 file's
// heat map and summary datasets described, each head's groups; the table with layer and head columns.
TEST(AdviseHeads, TheReportHasARowPerHeadAndTheSummary) {
  const AdviseOptions o = quick();
  // Without V the iid normalisers are exact: every head names an M (or is out of reach), so the summary is settled.
  const Heads q = heads(4, 8, 32, 0.4, 501, 2), k = heads(2, 8, 32, 0.4, 601, 2);
  const HeadsAdvice h = advise_heads(stack_heads(q.array, k.array, nullptr, kNames), o);
  const nlohmann::json j = to_json(h, record_advise(o));
  EXPECT_EQ(j.at("rows").size(), 4 * h.heads[0].advice.rows.size());
  EXPECT_EQ(j.at("inputs").at("query_heads"), 2);
  EXPECT_EQ(j.at("inputs").at("kv_heads"), 1);
  EXPECT_EQ(j.at("heads").size(), 4u);
  EXPECT_EQ(j.at("rows")[j.at("rows").size() - 1].at("layer"), 1);
  EXPECT_EQ(j.at("rows")[j.at("rows").size() - 1].at("head"), 1);
  EXPECT_EQ(j.at("rows")[j.at("rows").size() - 1].at("kv_head"), 0);
  ASSERT_TRUE(h.best) << j.at("summary").dump();
  const HeadsSummary& best = h.summary[*h.best];
  EXPECT_EQ(j.at("summary")[*h.best].at("m_for_target_every_head"), best.m_every);
  // Exact attention is a candidate: the choice follows the FLOPs of the M for every head against exact attention's.
  const Advice& first = h.heads[0].advice;
  const double rf = advise_steps::rf_attention_flops(32, 32, 8, 1, static_cast<double>(best.m_every));
  EXPECT_EQ(h.choice, rf < first.cost.exact_flops ? "random features" : "exact softmax") << h.recommendation;
  EXPECT_EQ(j.at("choice"), h.choice);
  EXPECT_EQ(j.at("summary")[*h.best].at("pays_from_length"), 2.0 * static_cast<double>(best.m_every));
  EXPECT_EQ(h.recommendation.find("keep exact softmax attention on every head") != std::string::npos,
            h.choice == "exact softmax")
      << h.recommendation;

  const std::string path =
      (std::filesystem::temp_directory_path() / ("kestrel_heads_" + std::to_string(::getpid()) + ".h5")).string();
  {
    H5Writer w(path);
    write_report(w, h, record_advise(o));
    w.commit();
  }
  H5Reader r(path);
  const arma::mat m = r.read_mat("/advise/m_needed");
  ASSERT_EQ(m.n_rows, 2u);
  ASSERT_EQ(m.n_cols, 2u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(m(i / 2, i % 2), static_cast<double>(best.m_each[i]));
  EXPECT_EQ(r.attr_string("/advise/m_needed", "axes"), "layer,head");
  EXPECT_EQ(r.attr_string("/advise/m_needed", "units"), "1");
  EXPECT_FALSE(r.attr_string("/advise/m_needed", "description").empty());
  const std::string g = "/advise/summary/" + best.estimator + "/" + best.sampler;
  EXPECT_EQ(r.attr_int(g, "m_for_target_every_head"), static_cast<std::int64_t>(best.m_every));
  EXPECT_EQ(r.attr_string("/advise", "choice"), h.choice);
  EXPECT_EQ(r.attr_string("/advise/layer1/head1", "choice"), h.heads[3].advice.choice);
  EXPECT_EQ(r.attr_string(g + "/m_per_head", "axes"), "layer,head");
  const std::string row = "/advise/layer1/head1/" + best.estimator + "/" + best.sampler;
  EXPECT_EQ(r.attr_int(row, "layer"), 1);
  EXPECT_EQ(r.attr_int(row, "head"), 1);
  EXPECT_EQ(r.read_vec(row + "/curve_p95").n_elem, h.heads[3].advice.rows[0].curve_p95.size());
  EXPECT_EQ(r.attr_string("/advise/layer1/head1/sampled_rows", "axes"), "row");
  std::filesystem::remove(path);

  std::ostringstream table;
  write_table(table, h);
  const std::string t = table.str();
  EXPECT_NE(t.find("2 layers x 2 query heads, 1 key/value heads"), std::string::npos) << t;
  EXPECT_NE(t.find("grouped-query attention"), std::string::npos) << t;
  EXPECT_NE(t.find(" layer head"), std::string::npos) << t;
  EXPECT_NE(t.find("summary over the 4 heads"), std::string::npos) << t;
  EXPECT_NE(t.find("fewer FLOPs"), std::string::npos) << t;
  EXPECT_NE(t.find("cost per head at L = 32: exact softmax attention"), std::string::npos) << t;
}

TEST(AdviseHeads, ShapesThatDoNotFitAreRefusedNamingTheValues) {
  const auto refused = [](const TokenArray& q, const TokenArray& k, const TokenArray* v, const std::string& words) {
    try {
      stack_heads(q, k, v, {"--queries", "--keys", "--values"});
      ADD_FAILURE() << "not refused: " << words;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const Heads q3 = heads(3, 8, 16, 0.4, 1), k2 = heads(2, 8, 16, 0.4, 2), k1 = heads(1, 8, 16, 0.4, 3);
  const Heads v15 = heads(1, 2, 15, 1.0, 5), v3 = heads(3, 2, 16, 1.0, 5);
  refused(q3.array, k2.array, nullptr, "--keys has 2 heads, which does not divide the 3 query heads");
  refused(q3.array, heads(1, 7, 16, 0.4, 4).array, nullptr, "--keys has d = 7 but --queries has d = 8");
  refused(q3.array, k1.array, &v15.array, "--values has L = 15 tokens per head but --keys has L = 16");
  refused(q3.array, k1.array, &v3.array, "--values has 3 heads but --keys has 1");
  refused(heads(4, 8, 16, 0.4, 6, 2).array, heads(3, 8, 16, 0.4, 7, 3).array, nullptr,
          "--keys has 3 layers but --queries has 2");
  refused(q3.array, heads(2, 8, 16, 0.4, 8, 2).array, nullptr,
          "--keys has the shape [2, 1, 16, 8] but --queries has [3, 16, 8]");
  TokenArray flat{{16, 8}, k1.m[0]};
  refused(q3.array, flat, nullptr,
          "--keys has the shape [16, 8] but --queries has [3, 16, 8]: give all of them as "
          "[heads, L, d]");
  refused(q3.array, TokenArray{{1, 0, 8}, arma::mat(8, 0)}, nullptr,
          "--keys has the shape [1, 0, 8]: an axis is empty");
  EXPECT_NO_THROW(stack_heads(q3.array, k1.array, nullptr, kNames));
}

}  // namespace
}  // namespace kestrel
