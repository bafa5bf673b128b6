// OpenBLAS thread control for TBB-parallel code (see parallel.hpp).
#include "core/parallel.hpp"

#include <cstdlib>

// Declared weak: present when the BLAS is OpenBLAS, null otherwise.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace kestrel {

void single_threaded_blas() {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr && openblas_set_num_threads != nullptr)
    openblas_set_num_threads(1);
}

}  // namespace kestrel
