// Data catalog and checksum verification (see catalog.hpp).
#include "data/catalog.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "core/error.hpp"
#include "kestrel_paths.hpp"

namespace kestrel {

std::string default_data_dir() {
  if (const char* env = std::getenv("KESTREL_DATA_DIR"); env && *env) return env;
  return KESTREL_DEFAULT_DATA_DIR;
}

bool DataSetStatus::installed() const {
  for (const auto& f : files)
    if (!f.present) return false;
  return true;
}
bool DataSetStatus::verified() const {
  for (const auto& f : files)
    if (!f.ok()) return false;
  return true;
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open file", path));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw IoError("OpenSSL: sha256 init failed");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(in.gcount())) != 1)
      throw IoError("OpenSSL: sha256 update failed");
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw IoError("OpenSSL: sha256 final failed");
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::vector<DataSetStatus> data_status(const std::string& dir, bool verify) {
  const std::string manifest = dir + "/CHECKSUMS.sha256";
  std::ifstream in(manifest);
  if (!in) throw IoError(fmt::format("{}: cannot open the data manifest (is the data directory right?)", manifest));
  std::vector<DataSetStatus> sets;
  std::map<std::string, std::size_t> index;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    DataFileStatus f;
    if (!(ls >> f.expected_sha256 >> f.file) || f.expected_sha256.size() != 64)
      throw IoError(fmt::format("{}: line {}: expected '<sha256>  <file>'", manifest, line_no));
    const auto slash = f.file.find('/');
    std::string name = f.file.substr(0, slash);
    if (name == "uci") name = f.file.substr(0, f.file.find('/', slash + 1));
    const std::string path = dir + "/" + f.file;
    std::error_code ec;
    f.present = std::filesystem::is_regular_file(path, ec);
    if (f.present) {
      f.bytes = std::filesystem::file_size(path, ec);
      if (verify) f.actual_sha256 = sha256_file(path);
    }
    if (!index.count(name)) index[name] = sets.size(), sets.push_back({name, {}});
    sets[index[name]].files.push_back(std::move(f));
  }
  return sets;
}

}  // namespace kestrel
