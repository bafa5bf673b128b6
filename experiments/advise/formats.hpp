// `kestrel reproduce advise`: advise --sums (the key sums in fp32, bf16, fp16) checked against the machine's own
// arithmetic (formats.cpp).
#pragma once
#include <string>
#include <vector>

#include "advise/advise.hpp"

namespace kestrel::experiments {

struct FormatCheck {
  struct One {
    std::string format;
    double max_rel_diff = 0;                        // over lengths, error with rounding and of rounding alone
    arma::uword overflow = 0, advise_overflow = 0;  // tokens when the sums first overflowed (0: never)
    std::size_t valid = 0, advise_valid = 0;        // lengths before an overflow or a zero normaliser
    bool agrees() const;                            // to 1e-9, and the same lengths
  };
  std::vector<One> formats;
};

// Replays advise's sums report (a.sums: its estimator, sampler, M, chunk, seed and lengths) on input c.
FormatCheck check_formats(const AdviseCase& c, const Advice& a);

// The claims: advise --sums --chunk 1 and --chunk 256 on an input of its own (L = 1024, 4096 at paper settings), every
// format replayed; and the fp16 stall. Writes /formats/... to h5.
void run_format_claims(const Options& opt, H5Writer& h5, std::vector<Claim>& claims);

// n terms of 1 summed in fp16 one by one: with _Float16, and with kestrel's emulation (RoundedSums).
double fp16_stall_native(std::size_t n);
double fp16_stall_emulated(std::size_t n);

}  // namespace kestrel::experiments
