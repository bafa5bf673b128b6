// The test process set up as the command line and the Python module set up theirs (core/parallel.hpp): OpenBLAS
// single-threaded, its threads otherwise spinning against TBB's (measured beside a build: an advise test with learned
// maps took 20 s with OpenBLAS's own threads and 0.95 s without).
#include <gtest/gtest.h>

#include "core/parallel.hpp"

namespace {

class BlasEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { kestrel::single_threaded_blas(); }
};

[[maybe_unused]] const ::testing::Environment* const kBlas = ::testing::AddGlobalTestEnvironment(new BlasEnvironment);

}  // namespace
