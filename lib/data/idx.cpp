// IDX and CIFAR-10 binary parsers (see idx.hpp).
#include "data/idx.hpp"

#include <fstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace kestrel {

IdxArray parse_idx(std::span<const std::uint8_t> b, const std::string& source) {
  auto fail = [&](const std::string& what) { throw IoError(fmt::format("{}: IDX: {}", source, what)); };
  if (b.size() < 4) fail(fmt::format("file is {} bytes, too short for the 4-byte magic number", b.size()));
  if (b[0] != 0 || b[1] != 0)
    fail(fmt::format("bad magic number: first bytes {:#04x} {:#04x}, expected 0 0", b[0], b[1]));
  if (b[2] != 0x08) fail(fmt::format("unsupported element type {:#04x} (only 0x08, unsigned byte)", b[2]));
  const unsigned nd = b[3];
  if (nd < 1 || nd > 4) fail(fmt::format("number of dimensions is {}, expected 1 to 4", nd));
  const std::size_t header = 4 + 4 * std::size_t{nd};
  if (b.size() < header) fail(fmt::format("file is {} bytes, too short for a {}-dimension header", b.size(), nd));
  IdxArray a;
  std::uint64_t count = 1;
  for (unsigned k = 0; k < nd; ++k) {
    const std::size_t o = 4 + 4 * std::size_t{k};
    const std::uint32_t v = (std::uint32_t{b[o]} << 24) | (std::uint32_t{b[o + 1]} << 16) |
                            (std::uint32_t{b[o + 2]} << 8) | std::uint32_t{b[o + 3]};
    a.dims.push_back(v);
    count *= v;
    if (count > (std::uint64_t{1} << 34)) fail("declared size exceeds 16 GiB");
  }
  const std::uint64_t have = b.size() - header;
  if (have < count) fail(fmt::format("truncated: header declares {} data bytes, file has {}", count, have));
  if (have > count) fail(fmt::format("{} unexpected bytes after the declared {} data bytes", have - count, count));
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

CifarBatch parse_cifar(std::span<const std::uint8_t> b, const std::string& source) {
  constexpr std::size_t kRecord = 3073;
  if (b.empty()) throw IoError(fmt::format("{}: CIFAR-10: file is empty", source));
  if (b.size() % kRecord != 0)
    throw IoError(
        fmt::format("{}: CIFAR-10: wrong record size: {} bytes is not a whole number of 3073-byte records "
                    "(record {} is truncated)",
                    source, b.size(), b.size() / kRecord));
  const std::size_t n = b.size() / kRecord;
  CifarBatch c;
  c.labels.resize(n);
  c.pixels.resize(n * (kRecord - 1));
  for (std::size_t r = 0; r < n; ++r) {
    const std::uint8_t* rec = b.data() + r * kRecord;
    if (rec[0] > 9) throw IoError(fmt::format("{}: CIFAR-10: record {}: label {} is not in 0..9", source, r, rec[0]));
    c.labels[r] = rec[0];
    std::copy(rec + 1, rec + kRecord, c.pixels.begin() + static_cast<std::ptrdiff_t>(r * (kRecord - 1)));
  }
  return c;
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(fmt::format("{}: cannot open file", path));
  std::vector<std::uint8_t> v((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw IoError(fmt::format("{}: read error", path));
  return v;
}

}  // namespace kestrel
