// advise --sums: the recommended row's key sums S = sum_j phi(k_j) [v_j, 1]^T held in number formats (SumsReport in
// advise.hpp, the emulation in analysis/rounded_sums.hpp), their error next to the error of the same draws in double,
// the length from which rounding dominates and where a format overflows; and the report's parts for them.
#include "tasks/advise/steps.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/rounded_sums.hpp"
#include "core/error.hpp"
#include "core/logmath.hpp"
#include "io/hdf5.hpp"

namespace kestrel::advise_steps {

namespace {

// Draws of M features behind each error (each a full pass over the keys in every format).
constexpr std::size_t kSumsDraws = 8;
// Keys whose features are formed at a time (a tile of Lk x M is never held).
constexpr arma::uword kKeyTile = 1024;
// Draw r of the sums comes from the stream (seed, Features, kFirstStream + r): 0 is the feature range's, 1 timing's.
constexpr std::uint64_t kFirstStream = 16;

// 16, 32, 64, ... below Lk, then Lk.
std::vector<arma::uword> sum_lengths(arma::uword L) {
  std::vector<arma::uword> l;
  for (arma::uword v = 16; v < L; v *= 2) l.push_back(v);
  l.push_back(L);
  return l;
}

// Per row and length, the sums over draws of a squared error and of its square (for the standard error).
struct Acc {
  arma::mat sum, sum2;
  Acc(arma::uword rows, arma::uword lengths)
      : sum(rows, lengths, arma::fill::zeros), sum2(rows, lengths, arma::fill::zeros) {}
  void add(arma::uword k, const arma::vec& e2) {
    sum.col(k) += e2;
    sum2.col(k) += arma::square(e2);
  }
  // The 95th percentile over rows of sqrt(mean) / norm and its standard error (quantile_se).
  std::pair<double, double> p95(arma::uword k, std::size_t draws, double norm) const {
    const double R = static_cast<double>(draws);
    const arma::vec mean = sum.col(k) / R;
    const arma::vec se = arma::sqrt(arma::clamp(sum2.col(k) / R - arma::square(mean), 0, arma::datum::inf) / (R - 1));
    const auto [err, err_se] =
        row_errors(mean, se, arma::vec(mean.n_elem, arma::fill::value(norm)), AdviseMetric::Rmse);
    const double q = quantile(err, 0.95);
    return {q, quantile_se(err, err_se, 0.95)};
  }
};

}  // namespace

void check_sums(const arma::mat& V, const AdviseOptions& opt) {
  if (!opt.sums.empty() && V.is_empty())
    throw InvalidArgument(
        "sums: the key sums are those of attention output rows: give the values V (--values), or leave out --sums");
}

void emulate_sums(Advice& a, const Inputs& in, const std::vector<std::unique_ptr<Estimator>>& fitted, const Say& say) {
  const AdviseOptions& opt = a.options;
  if (opt.sums.empty()) return;
  SumsReport rep;
  rep.chunk = opt.chunk;
  rep.seed = opt.seed;
  for (const auto& n : opt.sums) rep.formats.push_back({.name = n});
  // The recommended row at its M; without one, the first row whose sums can be formed, at the budget.
  std::optional<std::size_t> pick = a.best;
  rep.m_is = "its M for the target";
  if (!pick) {
    rep.m_is = "the budget: no estimator reaches the target";
    for (std::size_t k = 0; k < a.rows.size() && !pick; ++k)
      if (a.rows[k].status == "ok" && find_family(a.rows[k].estimator).kind != Kind::Hybrid) pick = k;
  }
  const Estimator* e = nullptr;
  if (pick) {
    const AdviceRow& b = a.rows[*pick];
    rep.estimator = b.estimator;
    rep.sampler = b.sampler;
    rep.m = a.best ? b.m_p95 : opt.budget;
    for (const auto& f : fitted)
      if (f && f->info().name == b.estimator) e = f.get();
    if (find_family(b.estimator).kind == Kind::Hybrid) {
      rep.note = "the recommended estimator is a hybrid: its features have ~M^2 columns, so its sums are not formed";
      e = nullptr;
    }
  } else {
    rep.note = "no estimator could be evaluated";
  }
  if (!e) {
    a.sums = rep;
    return;
  }
  const Sampler sampler = parse_sampler(rep.sampler);
  rep.draws = kSumsDraws;
  rep.lengths = sum_lengths(in.Kk.n_cols);
  const arma::uword nl = rep.lengths.size(), rows = in.rows.n_elem, dv = in.V.n_cols, M = rep.m;
  const std::size_t nf = rep.formats.size();
  // Exact attention of the sampled rows over the first l keys, and its RMS output row.
  std::vector<arma::mat> Y(nl);
  arma::vec rms(nl);
  for (arma::uword k = 0; k < nl; ++k) {
    const arma::uword l = rep.lengths[k];
    Y[k] = exact_attention(in.Qa.cols(in.rows), in.Ka.head_cols(l), in.V.head_rows(l)).Y;
    rms(k) = std::sqrt(arma::accu(arma::square(Y[k])) / static_cast<double>(rows));
  }
  Acc plain(rows, nl);
  std::vector<Acc> total(nf, Acc(rows, nl)), rounding(nf, Acc(rows, nl));
  std::vector<std::size_t> valid(nf, nl);
  std::vector<double> flushed(nf, 0.0), stored(nf, 0.0);
  const arma::mat Xq = in.Qk.cols(in.rows);
  auto scale = [&](const arma::mat& X) {
    return opt.kernel.alpha == 0 ? arma::vec() : arma::vec(opt.kernel.alpha * arma::sum(arma::square(X), 0).t());
  };
  auto key_logs = [&](const Draw& w, arma::uword j0, arma::uword j1) {
    const arma::mat X = in.Kk.cols(j0, j1 - 1);
    return e->log_features(w, X, Side::Key, scale(X));
  };
  // The sampled rows' outputs from a state M x (dv + 1) and the query features; normalisers in den.
  auto outputs = [&](const arma::mat& P, const arma::mat& S, arma::vec& den) {
    den = P * S.col(dv);
    arma::mat num = P * S.head_cols(dv);
    num.each_col() /= den;
    return num;
  };
  for (std::size_t r = 0; r < kSumsDraws; ++r) {
    say(fmt::format("key sums in {}: draw {} of {} ({} at M = {})", fmt::join(opt.sums, ", "), r + 1, kSumsDraws,
                    row_label(a.rows[*pick]), M));
    Rng rng(opt.seed, Stream::Features, kFirstStream + r);
    const Draw w = draw_columns(*e, M, rng, sampler);
    // The stabiliser: query rows minus their max (cancels in the ratio), keys minus the largest key log-feature.
    arma::mat P = e->log_features(w, Xq, Side::Query, scale(Xq));
    P.each_col() -= arma::max(P, 1);
    P = arma::exp(P);
    double top = -kInf;
    for (arma::uword j0 = 0; j0 < in.Kk.n_cols; j0 += kKeyTile)
      top = std::max(top, key_logs(w, j0, std::min(in.Kk.n_cols, j0 + kKeyTile)).max());
    // Columns of the features: M (advise counts M in feature columns).
    const arma::uword width = P.n_cols;
    arma::mat Sd(width, dv + 1, arma::fill::zeros);
    std::vector<RoundedSums> sums;
    for (const auto& f : rep.formats) sums.emplace_back(find_float_format(f.name), width, dv, opt.chunk);
    arma::uword j0 = 0;
    for (arma::uword k = 0; k < nl; ++k) {
      for (; j0 < rep.lengths[k];) {
        const arma::uword j1 = std::min(rep.lengths[k], j0 + kKeyTile);
        const arma::mat F = arma::exp(key_logs(w, j0, j1) - top);
        const arma::mat V = in.V.rows(j0, j1 - 1);
        Sd += F.t() * arma::join_rows(V, arma::ones(V.n_rows));
        for (auto& s : sums)
          if (!s.overflow()) s.add(F, V);
        j0 = j1;
      }
      arma::vec den;
      const arma::mat Yd = outputs(P, Sd, den);
      plain.add(k, arma::sum(arma::square(Yd - Y[k]), 1));
      for (std::size_t f = 0; f < nf; ++f) {
        if (k >= valid[f]) continue;
        FormatSums& fs = rep.formats[f];
        const arma::mat S = sums[f].state();
        if (sums[f].overflow() || !S.is_finite()) {
          const arma::uword at = sums[f].overflow() ? sums[f].overflow() : rep.lengths[k];
          fs.overflow_length = fs.overflow_length ? std::min(fs.overflow_length, at) : at;
          valid[f] = k;
          continue;
        }
        const arma::mat Yf = outputs(P, S, den);
        if (arma::any(den <= 0)) {
          fs.zero_normaliser_length =
              fs.zero_normaliser_length ? std::min(fs.zero_normaliser_length, rep.lengths[k]) : rep.lengths[k];
          valid[f] = k;
          continue;
        }
        total[f].add(k, arma::sum(arma::square(Yf - Y[k]), 1));
        rounding[f].add(k, arma::sum(arma::square(Yf - Yd), 1));
      }
    }
    for (std::size_t f = 0; f < nf; ++f) flushed[f] += sums[f].flushed(), stored[f] += sums[f].stored();
  }
  for (arma::uword k = 0; k < nl; ++k) {
    const auto [p, se] = plain.p95(k, kSumsDraws, rms(k));
    rep.err_p95.push_back(p);
    rep.err_p95_se.push_back(se);
  }
  for (std::size_t f = 0; f < nf; ++f) {
    FormatSums& fs = rep.formats[f];
    fs.valid = valid[f];
    fs.flushed = stored[f] > 0 ? flushed[f] / stored[f] : 0;
    for (arma::uword k = 0; k < fs.valid; ++k) {
      const auto [t, tse] = total[f].p95(k, kSumsDraws, rms(k));
      const auto [q, qse] = rounding[f].p95(k, kSumsDraws, rms(k));
      fs.err_p95.push_back(t);
      fs.err_p95_se.push_back(tse);
      fs.rounding_p95.push_back(q);
      fs.rounding_p95_se.push_back(qse);
    }
    for (arma::uword k = nl; k-- > 0;) {
      if (k < fs.valid && fs.rounding_p95[k] <= rep.err_p95[k]) break;
      fs.dominated_from = rep.lengths[k];
    }
  }
  a.sums = rep;
}

nlohmann::json sums_json(const SumsReport& s) {
  nlohmann::json j = {{"estimator", s.estimator},
                      {"sampler", s.sampler},
                      {"m", s.m},
                      {"m_is", s.m_is},
                      {"chunk", s.chunk},
                      {"draws", s.draws},
                      {"seed", s.seed},
                      {"lengths", s.lengths},
                      {"error_p95", s.err_p95},
                      {"error_p95_se", s.err_p95_se}};
  if (!s.note.empty()) j["note"] = s.note;
  nlohmann::json formats = nlohmann::json::object();
  for (const auto& f : s.formats) {
    auto opt_len = [](arma::uword v) { return v ? nlohmann::json(v) : nlohmann::json(nullptr); };
    formats[f.name] = {{"error_p95", f.err_p95},
                       {"error_p95_se", f.err_p95_se},
                       {"rounding_p95", f.rounding_p95},
                       {"rounding_p95_se", f.rounding_p95_se},
                       {"overflow_length", opt_len(f.overflow_length)},
                       {"zero_normaliser_length", opt_len(f.zero_normaliser_length)},
                       {"rounding_dominates_from", opt_len(f.dominated_from)},
                       {"flushed_features", f.flushed}};
  }
  j["formats"] = formats;
  return j;
}

namespace {

std::string order(const SumsReport& s) {
  return s.chunk == 1 ? std::string("token by token") : fmt::format("chunks of {} keys in fp32", s.chunk);
}

}  // namespace

void write_sums_table(std::ostream& out, const SumsReport& s) {
  if (!s.note.empty()) {
    out << "key sums in number formats: not emulated:\n  " << s.note << '\n';
    return;
  }
  out << fmt::format("key sums in number formats: {} {} at M = {} ({})\n  {}; {} draws, seed {}\n", s.estimator,
                     s.sampler, s.m, s.m_is, order(s), s.draws, s.seed);
  out << fmt::format("  {:>7}  {:>11}", "keys", "no rounding");
  for (const auto& f : s.formats) out << fmt::format("  {:>11}  {:>11}", f.name + " error", f.name + " round");
  out << '\n';
  for (std::size_t k = 0; k < s.lengths.size(); ++k) {
    out << fmt::format("  {:>7}  {:>11}", s.lengths[k], pct(s.err_p95[k]));
    for (const auto& f : s.formats) {
      if (k < f.valid)
        out << fmt::format("  {:>11}  {:>11}", pct(f.err_p95[k]), pct(f.rounding_p95[k]));
      else
        out << fmt::format("  {:>11}  {:>11}", f.overflow_length ? "overflow" : "normaliser", "-");
    }
    out << '\n';
  }
  for (const auto& f : s.formats) {
    std::string line = fmt::format("  {}: ", f.name);
    line += f.dominated_from ? fmt::format("rounding dominates from {} keys", f.dominated_from)
                             : std::string("rounding below the random-feature error at every length");
    line += f.overflow_length ? fmt::format("; overflows after {} keys", f.overflow_length) : "; no overflow";
    if (f.zero_normaliser_length) line += fmt::format("; a row's normaliser is 0 at {} keys", f.zero_normaliser_length);
    line += fmt::format("; {} of the key features stored as 0", pct(f.flushed));
    out << line << '\n';
  }
  out << "  (95th percentile over rows of the rmse over draws; error: with rounding against exact attention over the "
         "first\n  keys; round: against the same draws in double; stabilised features, queries in double)\n";
}

void write_sums(H5Writer& h5, const SumsReport& s, const std::string& root) {
  if (!s.note.empty() || s.lengths.empty()) return;
  const std::string g = root + "/sums";
  h5.group(g);
  h5.attr(g, "estimator", s.estimator);
  h5.attr(g, "sampler", s.sampler);
  h5.attr(g, "m", static_cast<std::uint64_t>(s.m));
  h5.attr(g, "chunk", static_cast<std::uint64_t>(s.chunk));
  h5.attr(g, "draws", static_cast<std::uint64_t>(s.draws));
  h5.attr(g, "order", order(s));
  h5.attr(g, "m_is", s.m_is);
  h5.write(g + "/lengths", std::vector<std::int64_t>(s.lengths.begin(), s.lengths.end()),
           {"number of keys summed (the first l keys of K)", "length"});
  h5.write(
      g + "/error_p95", s.err_p95,
      {"95th percentile over rows of the error without rounding (sums in double; rmse relative to RMS |Y|)", "length"});
  h5.write(g + "/error_p95_se", s.err_p95_se, {"standard error of error_p95 (the row at that percentile)", "length"});
  for (const auto& f : s.formats) {
    const std::string p = g + "/" + f.name;
    h5.group(p);
    h5.attr(p, "overflow_length", static_cast<std::uint64_t>(f.overflow_length));
    h5.attr(p, "zero_normaliser_length", static_cast<std::uint64_t>(f.zero_normaliser_length));
    h5.attr(p, "rounding_dominates_from", static_cast<std::uint64_t>(f.dominated_from));
    h5.attr(p, "flushed_features", f.flushed);
    if (f.valid == 0) continue;  // overflowed (or a normaliser 0) at the first length: the attributes say which
    const std::string upto = " (the first entries of lengths; beyond, the sums overflowed or a normaliser was 0)";
    h5.write(p + "/error_p95", f.err_p95,
             {"95th percentile over rows of the error with the sums in " + f.name + upto, "length"});
    h5.write(p + "/error_p95_se", f.err_p95_se, {"standard error of error_p95", "length"});
    h5.write(p + "/rounding_p95", f.rounding_p95,
             {"95th percentile over rows of the rounding error (" + f.name + " against double, same draws)" + upto,
              "length"});
    h5.write(p + "/rounding_p95_se", f.rounding_p95_se, {"standard error of rounding_p95", "length"});
  }
}

}  // namespace kestrel::advise_steps
