// Learned feature maps judged on held-out tokens (issue 65; see learned_attention.hpp): splits, fits along the M grid
// with warm starts, and the rmse row errors of the fitted maps on held-out and training rows.
#include "tasks/learned_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "tasks/attention.hpp"

namespace kestrel {

std::uint64_t fit_seed(std::uint64_t seed, arma::uword s) {
  return mix64(mix64(seed) ^ (0x9E3779B97F4A7C15ULL * (s + 1)));
}

double row_quantile(const arma::vec& v, double q) {
  require(!v.is_empty(), "quantile of no rows");
  const arma::vec w = arma::sort(v);
  const double pos = q * static_cast<double>(w.n_elem - 1);
  const auto lo = static_cast<arma::uword>(std::floor(pos));
  const arma::uword hi = std::min<arma::uword>(lo + 1, w.n_elem - 1);
  if (w[hi] == w[lo]) return w[lo];
  return w[lo] + (pos - static_cast<double>(lo)) * (w[hi] - w[lo]);
}

double row_quantile_se(const arma::vec& v, double q) {
  require(!v.is_empty(), "quantile of no rows");
  const arma::vec w = arma::sort(v);
  const double n = static_cast<double>(w.n_elem), c = n * q, sd = std::sqrt(n * q * (1 - q));
  // 1-based ranks c -+ sd, rounded outwards and clamped to 1..n.
  const double lo = std::clamp(std::floor(c - sd), 1.0, n), hi = std::clamp(std::ceil(c + sd), 1.0, n);
  return 0.5 * (w[static_cast<arma::uword>(hi) - 1] - w[static_cast<arma::uword>(lo) - 1]);
}

namespace {

void validate_head(const HeadSequences& h) {
  require(h.Q.size() >= 2, "learned maps need >= 2 sequences (fit on some, judge on the others), got {}", h.Q.size());
  require(h.K.size() == h.Q.size() && h.V.size() == h.Q.size(), "{} query, {} key and {} value sequences differ",
          h.Q.size(), h.K.size(), h.V.size());
  for (std::size_t s = 0; s < h.Q.size(); ++s) {
    try {
      validate_attention(h.Q[s], h.K[s], h.V[s]);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("sequence {}: {}", s, e.what()));
    }
    require(h.Q[s].n_rows == h.Q[0].n_rows && h.V[s].n_cols == h.V[0].n_cols,
            "sequence {} has d = {} and dv = {}, sequence 0 d = {} and dv = {}", s, h.Q[s].n_rows, h.V[s].n_cols,
            h.Q[0].n_rows, h.V[0].n_cols);
    require(!h.causal || h.Q[s].n_cols == h.K[s].n_cols,
            "sequence {}: causal attention needs one key per query position, got {} queries and {} keys", s,
            h.Q[s].n_cols, h.K[s].n_cols);
  }
}

void validate_options(const LearnedCurveOptions& o, std::size_t n_sequences) {
  require(!o.features.empty(), "learned maps: the M grid is empty");
  for (std::size_t k = 0; k < o.features.size(); ++k) {
    const arma::uword M = o.features[k];
    require(M > 0 && M % 2 == 0, "learned maps: M = {} must be even and > 0 (M = 2P)", M);
    if (k > 0)  // require's arguments are evaluated before its test: index k - 1 only where it exists
      require(M > o.features[k - 1], "learned maps: the M grid must increase, got {} after {}", M, o.features[k - 1]);
  }
  require(o.held_out >= 1 && o.held_out < n_sequences, "learned maps: held_out = {} must be in 1..{} ({} sequences)",
          o.held_out, n_sequences - 1, n_sequences);
  require(o.fit_seeds >= 1, "learned maps: fit_seeds must be >= 1, got 0");
  require(o.quantile > 0 && o.quantile < 1, "learned maps: quantile must be in (0, 1), got {}", o.quantile);
}

// The first k entries of a seeded shuffle of 0..n-1 (partial Fisher-Yates), and the rest; each part ascending.
std::pair<arma::uvec, arma::uvec> seeded_subset(arma::uword n, arma::uword k, Rng& rng) {
  arma::uvec idx = arma::regspace<arma::uvec>(0, n - 1);
  for (arma::uword i = 0; i < k; ++i) {
    const arma::uword j = i + std::min<arma::uword>(static_cast<arma::uword>(rng.uniform() * (n - i)), n - i - 1);
    std::swap(idx[i], idx[j]);
  }
  return {arma::sort(idx.head(k)), arma::sort(idx.tail(n - k))};
}

// Query column r at position r (causal sequences).
arma::uvec positions(const arma::mat& Q) { return arma::regspace<arma::uvec>(0, Q.n_cols - 1); }

// Exact attention of the sequences `which` (the reference of the row errors); the others are left empty.
std::vector<arma::mat> exact_outputs(const HeadSequences& h, const arma::uvec& which) {
  std::vector<arma::mat> Y(h.Q.size());
  for (const arma::uword s : which)
    Y[s] = h.causal ? exact_causal_attention(h.Q[s], positions(h.Q[s]), h.K[s], h.V[s]).Y
                    : exact_attention(h.Q[s], h.K[s], h.V[s]).Y;
  return Y;
}

LearnedRowErrors row_errors(const HedgehogParams& p, const HeadSequences& h, const std::vector<arma::mat>& Y,
                            const arma::uvec& which, double q) {
  const HedgehogMap map(p);
  Rng unused(0);
  const Draw none = map.draw(p.M(), unused, Sampler::Iid);
  std::vector<arma::vec> sq(which.n_elem);
  double total = 0, rows = 0;
  for (arma::uword k = 0; k < which.n_elem; ++k) {
    const arma::uword s = which[k];
    const arma::mat Yhat = h.causal
                               ? approximate_causal_attention(map, none, h.Q[s], positions(h.Q[s]), h.K[s], h.V[s]).Y
                               : approximate_attention(map, none, h.Q[s], h.K[s], h.V[s]).Y;
    sq[k] = arma::sum(arma::square(Yhat - Y[s]), 1);
    total += arma::accu(arma::square(Y[s]));
    rows += static_cast<double>(Y[s].n_rows);
  }
  const double rms = std::sqrt(total / rows);
  require(rms > 0, "learned maps: every exact output row is 0 on the rows judged (values all zero?)");
  LearnedRowErrors out;
  out.errors.set_size(static_cast<arma::uword>(rows));
  arma::uword at = 0;
  for (const arma::vec& v : sq) {
    out.errors.subvec(at, at + v.n_elem - 1) = arma::sqrt(v) / rms;
    at += v.n_elem;
  }
  out.quantile = row_quantile(out.errors, q);
  out.quantile_se = row_quantile_se(out.errors, q);
  return out;
}

// The training data of a fit: each training sequence's rows, a seeded subset of at most max_rows of them.
std::vector<AttentionRows> training_rows(const HeadSequences& h, const arma::uvec& train, arma::uword max_rows,
                                         std::uint64_t seed) {
  std::vector<AttentionRows> data;
  for (const arma::uword t : train) {
    const arma::uword L = h.Q[t].n_cols;
    arma::uvec rows;
    if (max_rows > 0 && L > max_rows) {
      Rng rng(seed, Stream::Data, 1 + t);
      rows = seeded_subset(L, max_rows, rng).first;
    }
    data.push_back(attention_rows(h.Q[t], h.K[t], rows, h.causal));
  }
  return data;
}

// Fit s along the M grid, each M warm-started from the last: fills slot s of every curve point.
void fit_chain(const HeadSequences& h, const std::vector<arma::mat>& Y, const LearnedCurveOptions& o, arma::uword s,
               std::vector<LearnedCurvePoint>& curve) {
  const std::uint64_t seed = fit_seed(o.seed, s);
  Rng split(seed, Stream::Data, 0);
  const auto [held, train] = seeded_subset(h.Q.size(), o.held_out, split);
  const std::vector<AttentionRows> data = training_rows(h, train, o.max_fit_rows, seed);
  HedgehogParams start;
  for (std::size_t k = 0; k < o.features.size(); ++k) {
    const arma::uword M = o.features[k];
    const auto t0 = std::chrono::steady_clock::now();
    start = k == 0 ? hedgehog_init(h.Q[0].n_rows, M, seed) : hedgehog_extend(start, M, seed);
    LearnedFitResult& r = curve[k].fits[s];
    r.fit = fit_hedgehog(start, data, o.fit);
    r.fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.train_sequences = train;
    r.held_out_sequences = held;
    r.held_out = row_errors(r.fit.params, h, Y, held, o.quantile);
    r.train = row_errors(r.fit.params, h, Y, train, o.quantile);
    start = r.fit.params;
  }
}

void summarise(LearnedCurvePoint& c) {
  const arma::uword S = c.fits.size();
  arma::vec held(S), train(S), secs(S);
  for (arma::uword s = 0; s < S; ++s)
    held[s] = c.fits[s].held_out.quantile, train[s] = c.fits[s].train.quantile, secs[s] = c.fits[s].fit_seconds;
  c.held_out_mean = arma::mean(held);
  c.held_out_se = S > 1 ? arma::stddev(held) / std::sqrt(static_cast<double>(S)) : 0.0;
  c.train_mean = arma::mean(train);
  c.gap_mean = arma::mean(held - train);
  c.fit_seconds = arma::mean(secs);
}

}  // namespace

std::vector<LearnedCurvePoint> learned_attention_curve(const HeadSequences& head, const LearnedCurveOptions& opt) {
  validate_head(head);
  validate_options(opt, head.Q.size());
  const std::vector<arma::mat> Y = exact_outputs(head, arma::regspace<arma::uvec>(0, head.Q.size() - 1));
  std::vector<LearnedCurvePoint> curve(opt.features.size());
  for (std::size_t k = 0; k < curve.size(); ++k) {
    curve[k].M = opt.features[k];
    curve[k].fits.resize(opt.fit_seeds);
  }
  for_each_block(opt.fit_seeds, [&](std::size_t s) { fit_chain(head, Y, opt, s, curve); });
  for (auto& c : curve) summarise(c);
  return curve;
}

LearnedRowErrors learned_row_errors(const HedgehogParams& p, const HeadSequences& head, const arma::uvec& which,
                                    double quantile) {
  validate_head(head);
  validate(p);
  require(p.d() == head.Q[0].n_rows, "learned maps: the map has d = {}, the sequences {}", p.d(), head.Q[0].n_rows);
  require(!which.is_empty() && which.max() < head.Q.size(), "learned maps: sequences to judge must be in 0..{}, got {}",
          head.Q.size() - 1, which.is_empty() ? std::string("none") : std::to_string(which.max()));
  require(quantile > 0 && quantile < 1, "learned maps: quantile must be in (0, 1), got {}", quantile);
  return row_errors(p, head, exact_outputs(head, which), which, quantile);
}

}  // namespace kestrel
