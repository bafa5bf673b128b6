// Running sums S = sum_j phi_j [v_j, 1]^T (the key sums of random-feature attention) held in an IEEE binary format
// (fp32, bf16, fp16), every operation rounded to the format, emulated exactly in double precision.
// Rounding is to nearest, ties to even, written from the definition (IEEE 754-2019 section 4.3.1): the format's spacing
// at |x| is 2^(max(e, emin) - p + 1) for 2^e <= |x| < 2^(e+1), so subnormals keep the smallest normal's spacing; a
// result above the largest finite value (2 - 2^(1-p)) 2^emax becomes Inf, which the sums report as an overflow (the
// token after which it happened) instead of carrying it on. A sum of two values of a format formed in double and then
// rounded to the format equals the correctly rounded sum, because double's 53 digits are at least 2p + 2 for every
// format here (double rounding is innocuous: Figueroa, "When is double rounding innocuous?", 1995).
// Order (what a model running in the format holds): features phi_jm and values v_jc are stored in the format; with
// chunk = 1 (decoding) each token's term round(phi_jm v_jc) is added to the state in the format, token by token; with
// chunk = C (chunked prefill) the terms of C consecutive tokens are summed in fp32 (each product and addition rounded
// to fp32, in token order), and the chunk's total, rounded to the format, is added to the state in the format. Tested
// against an independent NumPy emulation (python/tests/test_rounded_sums.py) and in tests/rounded_sums_test.cpp.
#pragma once
#include <string>
#include <vector>

#include <armadillo>

namespace kestrel {

// An IEEE binary format: p significand digits (the leading one included) and exponents emin..emax of normal numbers.
struct FloatFormat {
  std::string name;
  int digits = 0, emin = 0, emax = 0;
  double max() const;            // largest finite value
  double min_normal() const;     // 2^emin
  double min_subnormal() const;  // 2^(emin - p + 1)
};
const std::vector<FloatFormat>& float_formats();  // fp32 (p 24, emax 127), bf16 (8, 127), fp16 (11, 15)
std::vector<std::string> float_format_names();
// InvalidArgument naming the value and the formats for an unknown name.
const FloatFormat& find_float_format(const std::string& name);

// x rounded to the nearest value of the format, ties to even; +-Inf above the largest finite value (and for +-Inf);
// NaN stays NaN.
double round_to(double x, const FloatFormat& f);

// The running sums of one format: an M x (dv + 1) state, rows the features, columns the value columns and then the
// normaliser column (v = 1). Parallel over fixed blocks of features (each sum is added in token order by one thread):
// identical for any thread count.
class RoundedSums {
 public:
  // chunk >= 1 tokens per chunk (1: token by token).
  RoundedSums(const FloatFormat& f, arma::uword features, arma::uword values, arma::uword chunk);
  // Adds the next n tokens in order: phi (n x M features, >= 0, rounded to the format here), V (n x dv values, rounded
  // to the format here). After an overflow the sums stop changing (overflow() says when).
  void add(const arma::mat& phi, const arma::mat& V);
  // The state after the tokens so far, M x (dv + 1), with an unfinished chunk added as the model would add it at this
  // point. Holds Inf where the sums overflowed (overflow(), or where adding the unfinished chunk overflows).
  arma::mat state() const;
  arma::uword tokens() const { return tokens_; }
  // 0 when no value overflowed; else the number of tokens added when the first one did (the length it overflows at).
  arma::uword overflow() const;
  // Features > 0 that the format stored as 0 (below half its smallest subnormal), and the features stored.
  double flushed() const { return flushed_; }
  double stored() const { return stored_; }
  const FloatFormat& format() const { return f_; }

 private:
  FloatFormat f_;
  arma::uword chunk_, tokens_ = 0;
  arma::mat S_, acc_;                  // (dv + 1) x M: the state and the fp32 total of the unfinished chunk
  std::vector<arma::uword> overflow_;  // per block of features: the tokens when it overflowed (0: not)
  double flushed_ = 0, stored_ = 0;
};

}  // namespace kestrel
