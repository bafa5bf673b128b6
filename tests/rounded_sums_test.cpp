// Rounding to fp32 / bf16 / fp16 and the running sums held in them (analysis/rounded_sums.hpp): ties to even,
// subnormals and overflow by hand; fp32 (and fp16 where the compiler has _Float16) against the hardware's conversion;
// the equal-terms stall of fp16 (2048) and bf16 (256) and an exact overflow token.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "analysis/rounded_sums.hpp"
#include "core/error.hpp"

namespace kestrel {
namespace {

const FloatFormat& fmt_of(const char* n) { return find_float_format(n); }
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(RoundTo, TiesToEven) {
  const auto& h = fmt_of("fp16");
  const auto& b = fmt_of("bf16");
  EXPECT_EQ(round_to(2049, h), 2048);  // halfway between 2048 and 2050: the even significand
  EXPECT_EQ(round_to(2051, h), 2052);
  EXPECT_EQ(round_to(2049.0001, h), 2050);  // above half: up
  EXPECT_EQ(round_to(1 + std::ldexp(1, -11), h), 1);
  EXPECT_EQ(round_to(1 + 3 * std::ldexp(1, -11), h), 1 + std::ldexp(1, -9));
  EXPECT_EQ(round_to(-(1 + 3 * std::ldexp(1, -11)), h), -(1 + std::ldexp(1, -9)));  // symmetric
  EXPECT_EQ(round_to(257, b), 256);
  EXPECT_EQ(round_to(259, b), 260);
  EXPECT_EQ(round_to(1 + std::ldexp(1, -8), b), 1);
  EXPECT_EQ(round_to(1 + 3 * std::ldexp(1, -8), b), 1 + std::ldexp(1, -6));
  EXPECT_EQ(round_to(0.1, b), 0.10009765625);    // 0x3DCD
  EXPECT_EQ(round_to(0.1, h), 0.0999755859375);  // 0x2E66
  EXPECT_EQ(round_to(2047.5, h), 2048);          // rounding carries into the next binade
}

TEST(RoundTo, Subnormals) {
  const auto& h = fmt_of("fp16");
  const double q = std::ldexp(1, -24);  // fp16's smallest subnormal
  EXPECT_EQ(h.min_subnormal(), q);
  EXPECT_EQ(round_to(q, h), q);
  EXPECT_EQ(round_to(0.5 * q, h), 0);        // tie: 0 is even
  EXPECT_EQ(round_to(0.5000001 * q, h), q);  // above half
  EXPECT_EQ(round_to(1.5 * q, h), 2 * q);    // tie: 2 is even
  EXPECT_EQ(round_to(2.5 * q, h), 2 * q);
  EXPECT_EQ(round_to(1000.4 * q, h), 1000 * q);  // subnormal spacing stays q below 2^-14
  EXPECT_EQ(round_to(std::ldexp(1, -14) - 0.4 * q, h), std::ldexp(1, -14));
  const auto& b = fmt_of("bf16");
  EXPECT_EQ(b.min_subnormal(), std::ldexp(1, -133));
  EXPECT_EQ(round_to(std::ldexp(3, -135), b), std::ldexp(1, -133));  // 0.75 q: up
  EXPECT_EQ(round_to(std::ldexp(1, -134), b), 0);                    // 0.5 q: to 0
  EXPECT_EQ(round_to(std::numeric_limits<double>::denorm_min(), fmt_of("fp32")), 0);
}

TEST(RoundTo, Overflow) {
  const auto& h = fmt_of("fp16");
  EXPECT_EQ(h.max(), 65504);
  EXPECT_EQ(round_to(65504, h), 65504);
  EXPECT_EQ(round_to(65519.99, h), 65504);
  EXPECT_EQ(round_to(65520, h), kInf);  // halfway to 65536 (even, beyond the format): Inf, as IEEE says
  EXPECT_EQ(round_to(-1e6, h), -kInf);
  const auto& b = fmt_of("bf16");
  EXPECT_EQ(b.max(), 3.3895313892515355e38);
  EXPECT_EQ(round_to(3.4e38, b), kInf);
  EXPECT_EQ(round_to(std::numeric_limits<float>::max(), fmt_of("fp32")), std::numeric_limits<float>::max());
  EXPECT_EQ(round_to(1e39, fmt_of("fp32")), kInf);
  EXPECT_TRUE(std::isnan(round_to(std::nan(""), h)));
  EXPECT_THROW(find_float_format("fp8"), InvalidArgument);
}

// The hardware's double -> float conversion rounds to nearest even: an independent reference for fp32 over random
// doubles spanning normals, subnormals and overflow (and for fp16 where the compiler offers _Float16).
TEST(RoundTo, AgreesWithHardwareConversion) {
  std::mt19937_64 g(11);
  std::uniform_real_distribution<double> mant(-2, 2);
  std::uniform_int_distribution<int> ex(-160, 140);
  const auto& s = fmt_of("fp32");
  for (int k = 0; k < 200000; ++k) {
    const double x = std::ldexp(mant(g), ex(g));
    ASSERT_EQ(round_to(x, s), static_cast<double>(static_cast<float>(x))) << "x = " << x;
  }
#if defined(__FLT16_MAX__)
  const auto& h = fmt_of("fp16");
  std::uniform_int_distribution<int> ex16(-28, 17);
  for (int k = 0; k < 200000; ++k) {
    const double x = std::ldexp(mant(g), ex16(g));
    ASSERT_EQ(round_to(x, h), static_cast<double>(static_cast<_Float16>(x))) << "x = " << x;
  }
#endif
}

TEST(RoundedSums, EqualTermsStall) {
  const arma::mat phi = arma::ones(4096, 1), V = arma::ones(4096, 1);
  RoundedSums h(fmt_of("fp16"), 1, 1, 1);
  h.add(phi, V);
  EXPECT_EQ(h.state()(0, 1), 2048);  // 2048 + 1 is a tie between 2048 and 2050: stays 2048
  EXPECT_EQ(h.state()(0, 0), 2048);
  RoundedSums b(fmt_of("bf16"), 1, 1, 1);
  b.add(phi, V);
  EXPECT_EQ(b.state()(0, 1), 256);
  // Chunks of 256 summed in fp32 (exactly 256 each), the 16 totals added in fp16: 4096 is exact.
  RoundedSums c(fmt_of("fp16"), 1, 1, 256);
  c.add(phi, V);
  EXPECT_EQ(c.state()(0, 1), 4096);
  // An unfinished chunk is added as the model would add it: 4096 + 101 tokens -> 4197 rounded in fp16 (spacing 4).
  c.add(arma::ones(101, 1), arma::ones(101, 1));
  EXPECT_EQ(c.state()(0, 1), 4196);
  RoundedSums s(fmt_of("fp32"), 1, 1, 1);
  s.add(phi, V);
  EXPECT_EQ(s.state()(0, 1), 4096);
  EXPECT_EQ(h.overflow(), 0u);
}

TEST(RoundedSums, OverflowTokenAndFreeze) {
  // Terms 2048: the sums 2048 t are exact up to 31 * 2048 = 63488; 32 * 2048 = 65536 > 65504 overflows at token 32.
  RoundedSums h(fmt_of("fp16"), 3, 1, 1);
  arma::mat phi = arma::ones(40, 3), V(40, 1, arma::fill::value(2048.0));
  phi.col(2).fill(0.5);  // this feature reaches 32 * 1024 only: no overflow of its own
  h.add(phi.rows(0, 19), V.rows(0, 19));
  EXPECT_EQ(h.overflow(), 0u);
  h.add(phi.rows(20, 39), V.rows(20, 39));
  EXPECT_EQ(h.overflow(), 32u);
  // The same in bf16 does not overflow; with chunks of 8 the fp32 total 16384 per chunk is added in fp16: the fourth
  // chunk's sum 65536 overflows at token 32 too.
  RoundedSums b(fmt_of("bf16"), 3, 1, 1);
  b.add(phi, V);
  EXPECT_EQ(b.overflow(), 0u);
  EXPECT_TRUE(b.state().is_finite());
  RoundedSums c(fmt_of("fp16"), 3, 1, 8);
  c.add(phi, V);
  EXPECT_EQ(c.overflow(), 32u);
}

TEST(RoundedSums, FlushedFeaturesAndBadInput) {
  RoundedSums h(fmt_of("fp16"), 2, 1, 1);
  arma::mat phi = {{1e-9, 1.0}, {1.0, 1e-3}};
  h.add(phi, arma::ones(2, 1));
  EXPECT_EQ(h.flushed(), 1);  // 1e-9 is below half of 2^-24
  EXPECT_EQ(h.stored(), 4);
  EXPECT_EQ(h.state()(0, 1), 1);
  EXPECT_THROW(RoundedSums(fmt_of("fp16"), 2, 1, 0), InvalidArgument);
  EXPECT_THROW(h.add(arma::ones(2, 3), arma::ones(2, 1)), InvalidArgument);
}

}  // namespace
}  // namespace kestrel
