// Where data lives and whether it is intact: datasets/CHECKSUMS.sha256 lists every data file kestrel
// reads (UCI copies committed in the repository; MNIST, CIFAR-10, Fashion-MNIST installed by
// scripts/install-data.sh). The data directory is $KESTREL_DATA_DIR, else the repository's datasets/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kestrel {

std::string default_data_dir();

struct DataFileStatus {
  std::string file;  // relative to the data directory
  std::string expected_sha256, actual_sha256;
  std::uintmax_t bytes = 0;
  bool present = false;
  bool ok() const { return present && actual_sha256 == expected_sha256; }
};

struct DataSetStatus {
  std::string name;  // "mnist", "cifar10", "fashion-mnist", "uci/abalone", ...
  std::vector<DataFileStatus> files;
  bool installed() const;  // every file present
  bool verified() const;   // every file present with the listed sha256
};

// Reads the manifest in `dir`; with verify, hashes every present file.
std::vector<DataSetStatus> data_status(const std::string& dir, bool verify);

std::string sha256_file(const std::string& path);  // OpenSSL EVP, lowercase hex

}  // namespace kestrel
