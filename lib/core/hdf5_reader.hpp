// The one HDF5 reader over the C API (hdf5_hl), the counterpart of io/hdf5.hpp's H5Writer, used by data/ (points
// files) and io/ (LUNA maps, sweeps, tests): a file opened read-only with the library's own error printing off, whether
// a path exists, a dataset's shape, type class and dimension labels (H5DS, as h5py's dset.dims[k].label writes them),
// its values as doubles, the 1-D and row-major 2-D datasets H5Writer stores, text datasets and scalar attributes.
// Missing objects and wrong shapes throw IoError naming them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <hdf5.h>
#include <armadillo>

namespace kestrel {

class H5Reader {
 public:
  // IoError if it cannot be opened as HDF5; InputFileError if its root attributes `schema` and `schema_version` name a
  // kestrel schema newer than this version reads (core/schema.hpp check_schema).
  explicit H5Reader(const std::string& path);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  // Whether an object exists at path, every parent group included ("/a/b" needs "/a").
  bool exists(const std::string& path) const;
  bool has_attr(const std::string& obj, const std::string& name) const;  // obj "/" for the file's root

  struct Shape {
    std::vector<hsize_t> dims;        // slowest first
    H5T_class_t type = H5T_NO_CLASS;  // H5T_INTEGER, H5T_FLOAT, H5T_STRING, ...
    std::vector<std::string> labels;  // one per dimension, "" where unlabelled
    bool numeric() const { return type == H5T_INTEGER || type == H5T_FLOAT; }
  };
  // IoError if path is not a dataset.
  Shape shape(const std::string& dataset) const;
  // A numeric dataset's values converted to double, row-major (the last dimension fastest); IoError otherwise.
  std::vector<double> read_doubles(const std::string& dataset) const;

  arma::vec read_vec(const std::string& path) const;     // a 1-D floating-point dataset
  arma::mat read_mat(const std::string& path) const;     // a 2-D one written by H5Writer::write(mat)
  std::string read_text(const std::string& path) const;  // a string dataset written by H5Writer::write_text
  std::string attr_string(const std::string& obj, const std::string& name) const;
  double attr_double(const std::string& obj, const std::string& name) const;
  std::int64_t attr_int(const std::string& obj, const std::string& name) const;

 private:
  // A scalar variable-length string attribute (as h5py writes a str) into value; false for any other attribute.
  bool variable_string(const std::string& obj, const std::string& name, std::string& value) const;
  // The floating-point dataset at path, of the given rank: its values, row-major, and its dimensions.
  std::vector<double> read_float(const std::string& path, std::size_t rank, std::vector<hsize_t>& dims) const;
  std::string path_;
  hid_t file_ = -1;
};

}  // namespace kestrel
