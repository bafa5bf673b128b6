// Minimal HDF5 reader over the C API (hdf5_hl), the counterpart of H5Writer: numeric datasets (1-D and row-major
// 2-D, as H5Writer stores them) and scalar attributes. Missing objects and wrong shapes throw IoError naming them.
#pragma once
#include <cstdint>
#include <string>

#include <hdf5.h>
#include <armadillo>

namespace kestrel {

class H5Reader {
 public:
  explicit H5Reader(std::string path);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  bool exists(const std::string& path) const;
  arma::vec read_vec(const std::string& path) const;     // a 1-D dataset
  arma::mat read_mat(const std::string& path) const;     // a 2-D dataset written by H5Writer::write(mat)
  std::string read_text(const std::string& path) const;  // a string dataset written by H5Writer::write_text
  std::string attr_string(const std::string& obj, const std::string& name) const;
  double attr_double(const std::string& obj, const std::string& name) const;
  std::int64_t attr_int(const std::string& obj, const std::string& name) const;

 private:
  std::string path_;
  hid_t file_ = -1;
};

}  // namespace kestrel
