// `kestrel reproduce advise`, the number formats of the running sums (issue 47 items 3 and 5): advise --sums emulates
// the key sums S = sum_j phi(k_j) [v_j, 1]^T with every operation rounded to fp32, bf16 or fp16
// (analysis/rounded_sums.hpp, written from IEEE 754's definition of rounding). Checked here against the machine's own
// arithmetic, sharing none of that code: float for fp32, GCC's _Float16 (IEEE binary16, its conversions in libgcc; the
// CPU's F16C conversion with clang 14, which lacks _Float16) for fp16, and bf16 as float rounded on its upper 16 bits
// (to nearest, ties to even). Two values of a format are added or
// multiplied in float and rounded to the format once: float's 24 digits are at least 2p + 2 for bf16 (p = 8) and fp16
// (p = 11), so the result is the correctly rounded one (Figueroa 1995); doubles (features, values) are rounded to float
// to odd first, which makes the second rounding exact too. The check replays advise's draws (the same
// estimator, streams and stabilised key features: it checks the rounding, not the features), in the order advise
// states (token by token; or chunks of C tokens summed in float, each chunk's total rounded to the format and added),
// and compares, per length, the error with rounding and of the rounding alone, the overflow length and the length from
// which rounding dominates: they must agree to 1e-9 (the same numbers, up to the order of the double-precision sums
// behind them). And the exact case: 4096 equal terms of 1 sum to 2048 in fp16, in both.
#include "advise/formats.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#if !defined(__FLT16_MAX__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "analysis/rounded_sums.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "frontend/advise_options.hpp"
#include "io/hdf5.hpp"
#include "tasks/attention.hpp"

namespace kestrel::experiments {

namespace {

constexpr std::size_t kDraws = 8;           // advise's draws of the sums (tasks/advise/sums.cpp)
constexpr std::uint64_t kFirstStream = 16;  // and their first stream
constexpr arma::uword kKeyTile = 1024;      // its tiles of keys (their features are formed a tile at a time)
constexpr double kAgree = 1e-9;

float bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return x;
  u += 0x7FFFu + ((u >> 16) & 1u);  // to nearest on the upper 16 bits, ties to even (carries into the exponent)
  return std::bit_cast<float>(u & 0xFFFF0000u);
}
#if defined(__FLT16_MAX__)
float fp16(float x) { return static_cast<float>(static_cast<_Float16>(x)); }
#else  // clang 14 (the sanitize build) has no _Float16 on x86-64: the CPU's own F16C conversion, to nearest even
__attribute__((target("f16c"))) float fp16(float x) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT)));
}
#endif

// A double rounded to float "to odd" (toward zero, the last bit set where inexact): rounding that float to a format
// of p <= 22 digits then equals rounding the double to it directly (Boldo and Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", 2008), where rounding to nearest twice would not.
float to_odd(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) == x || !std::isfinite(f)) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

// One format on the machine: store() rounds a double to it; values are held as floats (exactly).
struct Native {
  std::string name;
  float (*round)(float);  // float -> the format (nullptr: fp32 itself)
  float store(double x) const { return round ? round(to_odd(x)) : static_cast<float>(x); }
  float add(float a, float b) const { return round ? round(a + b) : a + b; }
  float mul(float a, float b) const { return round ? round(a * b) : a * b; }
};

Native native(const std::string& name) {
  if (name == "fp32") return {name, nullptr};
  if (name == "bf16") return {name, bf16};
  if (name == "fp16") return {name, fp16};
  throw InvalidArgument(fmt::format("formats check: no native arithmetic for '{}'", name));
}

// The running sums in one format: token by token (chunk 1), or chunks summed in float.
struct NativeSums {
  Native f;
  arma::uword chunk, M, dv, tokens = 0, overflow = 0;
  arma::fmat state, part;  // M x (dv + 1); part: the unfinished chunk's float sums
  NativeSums(Native nf, arma::uword c, arma::uword m, arma::uword v)
      : f(std::move(nf)),
        chunk(c),
        M(m),
        dv(v),
        state(m, v + 1, arma::fill::zeros),
        part(m, v + 1, arma::fill::zeros) {}
  // Token j's stored features phi (M) and values v (dv).
  void add(const arma::vec& phi, const arma::rowvec& v) {
    if (overflow) return;
    ++tokens;
    for (arma::uword m = 0; m < M; ++m) {
      const float p = f.store(phi(m));
      for (arma::uword c = 0; c <= dv; ++c) {
        const float x = c < dv ? f.store(v(c)) : 1.0f;
        if (chunk == 1)
          state(m, c) = f.add(state(m, c), f.mul(p, x));
        else
          part(m, c) += p * x;  // float: each product and sum rounded to fp32
      }
    }
    if (chunk > 1 && tokens % chunk == 0) {
      for (arma::uword k = 0; k < state.n_elem; ++k) state(k) = f.add(state(k), f.store(part(k)));
      part.zeros();
    }
    if (!state.is_finite()) overflow = tokens;
  }
  // The state now, an unfinished chunk added as a model would add it here (Inf where it overflows).
  arma::mat now() const {
    arma::fmat s = state;
    if (chunk > 1 && tokens % chunk != 0)
      for (arma::uword k = 0; k < s.n_elem; ++k) s(k) = f.add(s(k), f.store(part(k)));
    return arma::conv_to<arma::mat>::from(s);
  }
};

double quantile95(arma::vec v) {
  v = arma::sort(v);
  const double pos = 0.95 * static_cast<double>(v.n_elem - 1);
  const auto lo = static_cast<arma::uword>(pos);
  const arma::uword hi = std::min<arma::uword>(lo + 1, v.n_elem - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

FormatCheck check_formats(const AdviseCase& c, const Advice& a) {
  require(a.sums.has_value() && a.sums->note.empty() && a.sums->m > 0, "formats check: {}: advise formed no sums",
          c.name);
  const SumsReport& rep = *a.sums;
  const auto e = fit_attention_estimator(rep.estimator, c.Q, c.K);
  const Sampler sampler = parse_sampler(rep.sampler);
  const arma::uword M = rep.m, dv = c.V.n_cols, nl = rep.lengths.size();
  const arma::mat Qs = attention_scaled(c.Q.cols(a.sampled_rows)), Ks = attention_scaled(c.K);
  const arma::uword rows = Qs.n_cols;
  FormatCheck out;
  std::vector<arma::vec> rms(nl);
  std::vector<arma::mat> Y(nl);
  for (arma::uword k = 0; k < nl; ++k) {
    const arma::uword l = rep.lengths[k];
    Y[k] = exact_attention(c.Q.cols(a.sampled_rows), c.K.head_cols(l), c.V.head_rows(l)).Y;
  }
  struct Per {
    arma::mat total, rounding;  // rows x lengths: sums of squared errors over draws
    arma::uword overflow = 0;
    std::size_t valid;
  };
  std::vector<Per> per;
  for (std::size_t f = 0; f < rep.formats.size(); ++f)
    per.push_back({arma::mat(rows, nl, arma::fill::zeros), arma::mat(rows, nl, arma::fill::zeros), 0, nl});
  for (std::size_t r = 0; r < kDraws; ++r) {
    Rng rng(rep.seed, Stream::Features, kFirstStream + r);
    const Draw w = e->draw(M, rng, sampler);
    arma::mat P = e->log_features(w, Qs, Side::Query);
    P.each_col() -= arma::max(P, 1);
    P = arma::exp(P);
    auto key_logs = [&](arma::uword j0, arma::uword j1) { return e->log_features(w, Ks.cols(j0, j1 - 1), Side::Key); };
    double top = -std::numeric_limits<double>::infinity();
    for (arma::uword j0 = 0; j0 < Ks.n_cols; j0 += kKeyTile)
      top = std::max(top, key_logs(j0, std::min(Ks.n_cols, j0 + kKeyTile)).max());
    std::vector<NativeSums> sums;  // as wide as the features (antithetic maps have 2M columns)
    for (const auto& fs : rep.formats) sums.emplace_back(native(fs.name), rep.chunk, P.n_cols, dv);
    arma::mat Sd(P.n_cols, dv + 1, arma::fill::zeros);
    arma::uword j0 = 0;
    for (arma::uword k = 0; k < nl; ++k) {
      for (; j0 < rep.lengths[k];) {
        const arma::uword j1 = std::min(rep.lengths[k], j0 + kKeyTile);
        const arma::mat F = arma::exp(key_logs(j0, j1) - top);
        const arma::mat V = c.V.rows(j0, j1 - 1);
        Sd += F.t() * arma::join_rows(V, arma::ones(V.n_rows));
        for (arma::uword j = 0; j < F.n_rows; ++j)
          for (auto& s : sums) s.add(F.row(j).t(), V.row(j));
        j0 = j1;
      }
      auto outputs = [&](const arma::mat& S) {
        arma::mat num = P * S.head_cols(dv);
        num.each_col() /= P * S.col(dv);
        return num;
      };
      const arma::mat Yd = outputs(Sd);
      for (std::size_t f = 0; f < sums.size(); ++f) {
        Per& p = per[f];
        if (k >= p.valid) continue;
        const arma::mat S = sums[f].now();
        if (sums[f].overflow || !S.is_finite()) {
          const arma::uword at = sums[f].overflow ? sums[f].overflow : rep.lengths[k];
          p.overflow = p.overflow ? std::min(p.overflow, at) : at;
          p.valid = k;
          continue;
        }
        if (arma::any(P * S.col(dv) <= 0)) {
          p.valid = k;
          continue;
        }
        const arma::mat Yf = outputs(S);
        p.total.col(k) += arma::sum(arma::square(Yf - Y[k]), 1);
        p.rounding.col(k) += arma::sum(arma::square(Yf - Yd), 1);
      }
    }
  }
  // Per format: the largest relative difference to advise's numbers, and whether the lengths agree.
  for (std::size_t f = 0; f < rep.formats.size(); ++f) {
    const FormatSums& fs = rep.formats[f];
    const Per& p = per[f];
    FormatCheck::One one{fs.name, 0.0, p.overflow, fs.overflow_length, p.valid, fs.valid};
    for (arma::uword k = 0; k < std::min<std::size_t>(p.valid, fs.valid); ++k) {
      const double norm = std::sqrt(arma::accu(arma::square(Y[k])) / static_cast<double>(rows));
      const double total = quantile95(arma::sqrt(p.total.col(k) / kDraws) / norm);
      const double rounding = quantile95(arma::sqrt(p.rounding.col(k) / kDraws) / norm);
      for (const auto& [mine, theirs] : {std::pair{total, fs.err_p95[k]}, std::pair{rounding, fs.rounding_p95[k]}})
        one.max_rel_diff = std::max(one.max_rel_diff, std::abs(mine - theirs) / std::max(std::abs(theirs), 1e-300));
    }
    out.formats.push_back(one);
  }
  return out;
}

bool FormatCheck::One::agrees() const {
  return max_rel_diff <= kAgree && overflow == advise_overflow && valid == advise_valid;
}

double fp16_stall_native(std::size_t n) {
#if defined(__FLT16_MAX__)
  _Float16 s = 0;
  for (std::size_t j = 0; j < n; ++j) s = static_cast<_Float16>(static_cast<float>(s) + 1.0f);
  return static_cast<double>(static_cast<float>(s));
#else
  float s = 0;
  for (std::size_t j = 0; j < n; ++j) s = fp16(s + 1.0f);
  return s;
#endif
}

double fp16_stall_emulated(std::size_t n) {
  RoundedSums s(find_float_format("fp16"), 1, 1, 1);
  s.add(arma::ones(n, 1), arma::ones(n, 1));
  return s.state()(0, 1);
}

void run_format_claims(const Options& opt, H5Writer& h5, std::vector<Claim>& claims) {
  // Zero-mean values, so that the M for the target (or the budget) is in the hundreds: sums of many columns.
  const arma::uword L = opt.quick ? 1024 : 4096;
  Rng rng(opt.seed, Stream::Data, 4000);
  AdviseCase input{fmt::format("formats-L{}", L),  "d = 16, entries N(0, 0.36), V ~ N(0, 1)",
                   0.6 * rng.normal_matrix(16, L), 0.6 * rng.normal_matrix(16, L),
                   rng.normal_matrix(L, 4),        opt.quick ? arma::uword{1024} : arma::uword{2048}};
  const AdviseCase* c = &input;
  int disagree = 0, checked = 0;
  std::string note;
  h5.group("/formats");
  h5.attr("/formats", "input", c->name);
  for (const arma::uword chunk : {arma::uword{1}, arma::uword{256}}) {
    AdviseOptions o;
    o.budget = c->budget;
    o.seed = opt.seed;
    o.rows = 64;
    o.timing = false;
    o.samplers = {Sampler::Iid};
    o.sums = {"fp32", "bf16", "fp16"};
    o.chunk = chunk;
    const Advice a = advise(c->Q, c->K, c->V, o);
    const FormatCheck ch = check_formats(*c, a);
    const std::string g = fmt::format("/formats/chunk{}", chunk);
    h5.write_text(g + "/report.json", to_json(a, record_advise(o)).dump(2),
                  {fmt::format("advise --sums fp32,bf16,fp16 --chunk {} on {} (JSON): per format and length the error "
                               "with rounding and of rounding alone, overflow and where rounding dominates",
                               chunk, c->name),
                   "text"});
    std::vector<double> diff;
    for (const auto& f : ch.formats) {
      ++checked;
      diff.push_back(f.max_rel_diff);
      if (!f.agrees()) {
        ++disagree;
        note += fmt::format(
            " {} chunk {}: relative difference {:.2e}, overflow {} against {}, valid lengths {} "
            "against {};",
            f.format, chunk, f.max_rel_diff, f.overflow, f.advise_overflow, f.valid, f.advise_valid);
      }
    }
    h5.write(g + "/max_relative_difference", diff,
             {"per format (fp32, bf16, fp16): the largest relative difference over lengths between advise's errors "
              "and the native replay's",
              "1"});
    const SumsReport& s = *a.sums;
    note += fmt::format(" chunk {}: {} {} at M = {}, lengths {}..{};", chunk, s.estimator, s.sampler, s.m,
                        s.lengths.front(), s.lengths.back());
  }
  claims.push_back({"issue 47 (advise --sums)",
                    "advise's emulated key sums in fp32, bf16 and fp16 equal the machine's own arithmetic",
                    fmt::format("(format, chunk) pairs of {} whose errors differ by more than 1e-9 relative, or whose "
                                "overflow or valid lengths differ",
                                checked),
                    "~", 0, static_cast<double>(disagree), 0,
                    fmt::format("{}: d = {}, L = {}, 8 draws, chunk 1 (decoding) and 256 (chunked prefill)", c->name,
                                c->Q.n_rows, c->K.n_cols),
                    "native: float, GCC's _Float16, bf16 rounded from float's bits; same draws and features as "
                    "advise's." +
                        note});
  const double emulated = fp16_stall_emulated(4096), machine = fp16_stall_native(4096);
  claims.push_back({"issue 47 (advise --sums)",
                    "4096 terms of 1 summed in fp16 one by one stop at 2048 (fp16's 11 digits: 2048 + 1 rounds to "
                    "2048)",
                    "the emulated fp16 sum of 4096 ones", "~", 2048, emulated, 0, "RoundedSums, fp16, chunk 1",
                    fmt::format("GCC's _Float16 gives {}", machine)});
  claims.push_back({"issue 47 (advise --sums)", "the same sum with the machine's _Float16 arithmetic",
                    "the native fp16 sum of 4096 ones", "~", 2048, machine, 0, "_Float16, one addition at a time", ""});
}

}  // namespace kestrel::experiments
