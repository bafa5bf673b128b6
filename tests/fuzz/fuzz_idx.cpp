// libFuzzer target: the IDX parser must either return a consistent array or throw IoError.
#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const kestrel::IdxArray a = kestrel::parse_idx({data, size}, "fuzz");
    std::uint64_t n = 1;
    for (auto d : a.dims) n *= d;
    if (n != a.data.size()) std::abort();  // parsed size must match the header
  } catch (const kestrel::IoError&) {
  }
  return 0;
}
