// `kestrel datasets`: which data sets are installed, where, and whether their sha256 match; exits 1
// if one is missing or does not match (2 if --data-dir is not a directory).
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "data/catalog.hpp"

namespace kestrel::cli {

Action add_datasets(CLI::App& app, const Global&) {
  struct Args {
    std::string dir;
    bool no_verify = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--data-dir", a->dir, "Data directory (default: $KESTREL_DATA_DIR or the repository's datasets/)");
  app.add_flag("--no-verify", a->no_verify, "Only check presence and size, do not hash");
  return [a] {
    const std::string dir = a->dir.empty() ? default_data_dir() : a->dir;
    require(a->dir.empty() || std::filesystem::is_directory(a->dir), "--data-dir: '{}' is not a directory", a->dir);
    const auto sets = data_status(dir, !a->no_verify);
    std::cout << fmt::format("data directory: {}\n{:<22} {:>6} {:>12}  {}\n", dir, "data set", "files", "bytes",
                             "status");
    std::string bad;
    for (const auto& s : sets) {
      std::uintmax_t bytes = 0;
      for (const auto& f : s.files) bytes += f.bytes;
      std::string status = !s.installed() ? "not installed (scripts/install-data.sh)"
                           : a->no_verify ? "installed (not verified)"
                           : s.verified() ? "installed, sha256 OK"
                                          : "CHECKSUM MISMATCH";
      if (!s.installed()) bad += (bad.empty() ? "" : ", ") + s.name + " (not installed)";
      if (s.installed() && !a->no_verify && !s.verified()) {
        bad += (bad.empty() ? "" : ", ") + s.name + " (checksum mismatch)";
        for (const auto& f : s.files)
          if (!f.ok()) status += " " + f.file;
      }
      std::cout << fmt::format("{:<22} {:>6} {:>12}  {}\n", s.name, s.files.size(), bytes, status);
    }
    if (!bad.empty())
      throw IoError("data sets missing or not matching datasets/CHECKSUMS.sha256: " + bad +
                    " (scripts/install-data.sh installs and verifies them)");
  };
}

}  // namespace kestrel::cli
