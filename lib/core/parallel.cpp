// OpenBLAS thread control for TBB-parallel code (see parallel.hpp).
#include "core/parallel.hpp"

#include <cstdlib>

#include <malloc.h>

// Declared weak: present when the BLAS is OpenBLAS, null otherwise.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace kestrel {

void single_threaded_blas() {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) set_blas_threads(1);
}

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's ceiling for it
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void set_blas_threads(int n) {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(n);
}

}  // namespace kestrel
