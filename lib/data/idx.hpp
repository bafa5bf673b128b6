// Readers for the binary image formats: IDX (MNIST, Fashion-MNIST; LeCun's format: 0, 0, type byte,
// number of dimensions, big-endian uint32 sizes, then the data) and the CIFAR-10 binary batches
// (3073-byte records: label byte, then 1024 red, 1024 green, 1024 blue values).
// Parsers take a byte buffer and a source name for messages; malformed input throws IoError naming
// the source, the record and the problem, and never reads out of bounds.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kestrel {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // row-major, product(dims) bytes
};

// Only unsigned-byte IDX (type 0x08) with 1 to 4 dimensions is accepted.
IdxArray parse_idx(std::span<const std::uint8_t> bytes, const std::string& source);

struct CifarBatch {
  std::vector<std::uint8_t> labels;  // 0..9
  std::vector<std::uint8_t> pixels;  // n x 3 x 32 x 32, planar RGB, as stored
};
CifarBatch parse_cifar(std::span<const std::uint8_t> bytes, const std::string& source);

// Whole-file read; IoError naming the path when it cannot be read.
std::vector<std::uint8_t> read_bytes(const std::string& path);

}  // namespace kestrel
