// Log-domain helpers against 50-digit references (Boost.Multiprecision).
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "core/logmath.hpp"

using namespace kestrel;
using big = boost::multiprecision::cpp_bin_float_50;

TEST(LogMath, Log1mexpMatchesReference) {
  for (double x : {-1e-300, -1e-12, -1e-5, -0.1, -0.69, -0.7, -1.0, -20.0, -700.0}) {
    const double ref = static_cast<double>(log1p(-exp(big(x))));
    EXPECT_NEAR(log1mexp(x), ref, 1e-14 * std::abs(ref)) << "x=" << x;
  }
  EXPECT_EQ(log1mexp(0.0), -kInf);
  EXPECT_TRUE(std::isnan(log1mexp(1.0)));
}

TEST(LogMath, AddSubExpAtExtremes) {
  // e^300 + e^299 and e^300 - e^299 overflow nothing in the log domain.
  const double ref_add = static_cast<double>(log(exp(big(300)) + exp(big(299))));
  const double ref_sub = static_cast<double>(log(exp(big(300)) - exp(big(299))));
  EXPECT_NEAR(log_add_exp(300, 299), ref_add, 1e-12 * ref_add);
  EXPECT_NEAR(log_sub_exp(300, 299), ref_sub, 1e-12 * ref_sub);
  EXPECT_NEAR(log_add_exp(-300, -301), static_cast<double>(log(exp(big(-300)) + exp(big(-301)))), 1e-12 * 300);
  EXPECT_EQ(log_sub_exp(5, 5), -kInf);
  EXPECT_EQ(log_add_exp(-kInf, -kInf), -kInf);
}

TEST(LogMath, LogExpm1TinyAndHuge) {
  for (double x : {1e-15, 1e-8, 0.5, 29.0, 31.0, 300.0, 800.0}) {
    const double ref = static_cast<double>(log(exp(big(x)) - 1));
    EXPECT_NEAR(log_expm1(x), ref, 1e-13 * std::max(1.0, std::abs(ref))) << "x=" << x;
  }
}

TEST(LogMath, SignedLogSums) {
  const SignedLog a = SignedLog::from_log(400.0, 1), b = SignedLog::from_log(399.0, -1);
  const SignedLog c = a + b;
  EXPECT_EQ(c.sign, 1);
  EXPECT_NEAR(c.log_abs, static_cast<double>(log(exp(big(400)) - exp(big(399)))), 1e-12 * 400);
  EXPECT_EQ((a + SignedLog::from_log(400.0, -1)).sign, 0);
  EXPECT_DOUBLE_EQ((SignedLog::from_value(-2.5) + SignedLog::from_value(1.0)).value(), -1.5);
  const SignedLog r = real_exp({1.0, M_PI});
  EXPECT_EQ(r.sign, -1);
  EXPECT_NEAR(r.log_abs, 1.0, 1e-15);
}
