// Minimal HDF5 writer over the C API (hdf5_hl). Writes go to a temporary file beside the target that
// is moved into place by commit() (without replace, atomically refusing a target that appeared meanwhile); an error,
// a missing commit or SIGINT/SIGTERM (io/output.hpp) leaves no partial output file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <hdf5.h>
#include <armadillo>

namespace kestrel {

class H5Writer {
 public:
  // replace: commit() may replace an existing file (--force, or a sweep extended in place).
  explicit H5Writer(std::string path, bool replace = false);
  ~H5Writer();
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  // Creates a group (and its parents) if missing; paths are absolute ("/variance/oprf").
  void group(const std::string& path);
  // Every dataset says what it is (Meaning): a one-line `description`, the names of its `axes` (comma-separated,
  // slowest first, e.g. "row" or "sigma,set_pair") and its `units` (UDUNITS spelling: "1" for dimensionless values,
  // which are most of kestrel's: ratios, natural logs of them, counts, indices; "s" for seconds, "byte", "FLOP"; text
  // has no units attribute). tests/outputs_test.cpp walks every file kestrel writes for all three.
  struct Meaning {
    std::string description;
    std::string axes;
    std::string units = "1";
  };
  void write(const std::string& path, const std::vector<double>& v, const Meaning& m);
  void write(const std::string& path, const arma::vec& v, const Meaning& m);
  void write(const std::string& path, const arma::mat& m, const Meaning& meaning);  // row-major as rows x cols
  void write(const std::string& path, const std::vector<std::int64_t>& v, const Meaning& m);
  // A string dataset (for JSON of any size; HDF5 attributes are limited to 64 KiB).
  void write_text(const std::string& path, const std::string& text, const Meaning& m);
  void attr(const std::string& obj, const std::string& name, const std::string& value);
  void attr(const std::string& obj, const std::string& name, double value);
  void attr(const std::string& obj, const std::string& name, std::int64_t value);
  void attr(const std::string& obj, const std::string& name, std::uint64_t value);
  // Copies the group or dataset `path` of the HDF5 file `file` to the same path here, with everything under it
  // (creating its parents): a merged report takes its heads' groups from its parts as they were written.
  void copy(const std::string& file, const std::string& path);
  void commit();  // closes the temporary file and publishes it (io/output.hpp publish_output)

 private:
  void describe(const std::string& path, const Meaning& m);
  std::string path_, tmp_;
  hid_t file_ = -1;
  bool replace_ = false;
};

// Library versions compiled in (Armadillo, GSL, HDF5, TBB, Boost, fmt, nlohmann_json).
std::string library_versions();

}  // namespace kestrel
