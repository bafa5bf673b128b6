// libFuzzer target: the CIFAR-10 binary parser must either return whole records or throw IoError.
#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const kestrel::CifarBatch b = kestrel::parse_cifar({data, size}, "fuzz");
    if (b.pixels.size() != b.labels.size() * 3072) std::abort();
    for (auto l : b.labels)
      if (l > 9) std::abort();
  } catch (const kestrel::IoError&) {
  }
  return 0;
}
