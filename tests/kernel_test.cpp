// Scaled softmax kernel: named cases, log-domain extremes, K C, and bad input.
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "core/error.hpp"
#include "kernels/kernel.hpp"
#include "test_util.hpp"

using namespace kestrel;

TEST(Kernel, NamedCasesMatchDefinitions) {
  const arma::mat X = test::points(5, 4, 0.7, 1), Y = test::points(5, 3, 0.7, 2);
  const arma::mat ls = log_kernel(Kernel::softmax(), X, Y), lg = log_kernel(Kernel::gaussian(), X, Y);
  const arma::mat lsc = log_kernel(Kernel{0.3}, X, Y);
  for (arma::uword i = 0; i < 4; ++i)
    for (arma::uword j = 0; j < 3; ++j) {
      const double xy = arma::dot(X.col(i), Y.col(j));
      EXPECT_NEAR(ls(i, j), xy, 1e-14);
      EXPECT_NEAR(lg(i, j), -0.5 * arma::accu(arma::square(X.col(i) - Y.col(j))), 1e-14);
      EXPECT_NEAR(lsc(i, j), 0.3 * arma::dot(X.col(i), X.col(i)) + xy + 0.3 * arma::dot(Y.col(j), Y.col(j)), 1e-13);
    }
}

TEST(Kernel, GaussianKernelOfEMinus300IsExactInLog) {
  // |x - y|^2 = 600 gives K = e^-300 (a denormal-free log even though e^-300 * e^-300 underflows).
  arma::mat X(2, 1, arma::fill::zeros), Y(2, 1, arma::fill::zeros);
  X(0, 0) = 1e6;
  Y(0, 0) = 1e6 + std::sqrt(600.0);
  const double ref =
      -0.5 * static_cast<double>(boost::multiprecision::cpp_bin_float_50(Y(0, 0) - X(0, 0)) * (Y(0, 0) - X(0, 0)));
  EXPECT_NEAR(log_kernel(Kernel::gaussian(), X, Y)(0, 0), ref, 1e-12 * 300);
}

TEST(Kernel, KernelTimesMatchesDenseProduct) {
  const arma::mat X = test::points(4, 6, 1.0, 3), Y = test::points(4, 5, 1.0, 4), C = test::points(5, 2, 1.0, 5);
  const arma::mat dense = arma::exp(log_kernel(Kernel::softmax(), X, Y)) * C;
  EXPECT_LT(arma::abs(kernel_times(Kernel::softmax(), X, Y, C) - dense).max(), 1e-12 * arma::abs(dense).max());
}

TEST(Kernel, ParseAndBadInput) {
  EXPECT_EQ(Kernel::parse("softmax").alpha, 0.0);
  EXPECT_EQ(Kernel::parse("gaussian").alpha, -0.5);
  EXPECT_EQ(Kernel::parse("scaled:0.25").alpha, 0.25);
  EXPECT_THROW(Kernel::parse("laplace"), InvalidArgument);
  EXPECT_THROW(Kernel::parse("scaled:abc"), InvalidArgument);
  EXPECT_THROW(Kernel::parse("scaled:nan"), InvalidArgument);
  EXPECT_THROW(validate_points(arma::mat(0, 3), "X"), InvalidArgument);
  EXPECT_THROW(validate_points(arma::mat(3, 0), "X"), InvalidArgument);
  arma::mat bad(2, 2, arma::fill::zeros);
  bad(1, 1) = arma::datum::nan;
  EXPECT_THROW(validate_points(bad, "X"), InvalidArgument);
  EXPECT_THROW(kernel_times(Kernel::softmax(), bad.ones(), bad.ones(), arma::ones(3, 1)), InvalidArgument);
}
