// HDF5 reader (see hdf5_reader.hpp).
#include "io/hdf5_reader.hpp"

#include <vector>

#include <fmt/format.h>
#include <hdf5_hl.h>

#include "core/error.hpp"

namespace kestrel {

H5Reader::H5Reader(std::string path) : path_(std::move(path)) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  file_ = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw IoError(fmt::format("cannot open HDF5 file '{}'", path_));
}

H5Reader::~H5Reader() {
  if (file_ >= 0) H5Fclose(file_);
}

bool H5Reader::exists(const std::string& path) const {
  // H5Lexists needs every parent to exist: check each prefix.
  std::size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos)
    if (H5Lexists(file_, path.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(file_, path.c_str(), H5P_DEFAULT) > 0;
}

namespace {
std::vector<hsize_t> dataset_dims(hid_t file, const std::string& path, const std::string& source) {
  int rank = 0;
  if (H5LTget_dataset_ndims(file, path.c_str(), &rank) < 0)
    throw IoError(fmt::format("'{}': no dataset {}", source, path));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5T_class_t cls{};
  std::size_t size = 0;
  if (H5LTget_dataset_info(file, path.c_str(), dims.data(), &cls, &size) < 0 || cls != H5T_FLOAT)
    throw IoError(fmt::format("'{}': dataset {} is not a floating-point dataset", source, path));
  return dims;
}
}  // namespace

arma::vec H5Reader::read_vec(const std::string& path) const {
  if (!exists(path)) throw IoError(fmt::format("'{}': no dataset {}", path_, path));
  const auto dims = dataset_dims(file_, path, path_);
  if (dims.size() != 1)
    throw IoError(fmt::format("'{}': dataset {} has rank {}, expected 1", path_, path, dims.size()));
  arma::vec v(dims[0]);
  if (H5LTread_dataset_double(file_, path.c_str(), v.memptr()) < 0)
    throw IoError(fmt::format("'{}': cannot read dataset {}", path_, path));
  return v;
}

arma::mat H5Reader::read_mat(const std::string& path) const {
  if (!exists(path)) throw IoError(fmt::format("'{}': no dataset {}", path_, path));
  const auto dims = dataset_dims(file_, path, path_);
  if (dims.size() != 2)
    throw IoError(fmt::format("'{}': dataset {} has rank {}, expected 2", path_, path, dims.size()));
  arma::mat row_major(dims[1], dims[0]);  // HDF5 is row-major: read the transpose, then transpose back
  if (H5LTread_dataset_double(file_, path.c_str(), row_major.memptr()) < 0)
    throw IoError(fmt::format("'{}': cannot read dataset {}", path_, path));
  return row_major.t();
}

std::string H5Reader::attr_string(const std::string& obj, const std::string& name) const {
  hsize_t dims = 0;
  H5T_class_t cls{};
  std::size_t size = 0;
  if (H5LTget_attribute_info(file_, obj.c_str(), name.c_str(), &dims, &cls, &size) < 0 || cls != H5T_STRING)
    throw IoError(fmt::format("'{}': no string attribute {} on {}", path_, name, obj));
  std::string s(size, '\0');
  if (H5LTget_attribute_string(file_, obj.c_str(), name.c_str(), s.data()) < 0)
    throw IoError(fmt::format("'{}': cannot read attribute {} of {}", path_, name, obj));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

double H5Reader::attr_double(const std::string& obj, const std::string& name) const {
  double v = 0;
  if (H5LTget_attribute_double(file_, obj.c_str(), name.c_str(), &v) < 0)
    throw IoError(fmt::format("'{}': no numeric attribute {} on {}", path_, name, obj));
  return v;
}

std::int64_t H5Reader::attr_int(const std::string& obj, const std::string& name) const {
  long long v = 0;
  if (H5LTget_attribute_long_long(file_, obj.c_str(), name.c_str(), &v) < 0)
    throw IoError(fmt::format("'{}': no integer attribute {} on {}", path_, name, obj));
  return v;
}

std::string H5Reader::read_text(const std::string& path) const {
  if (!exists(path)) throw IoError(fmt::format("{}: no dataset '{}'", path_, path));
  const hid_t ds = H5Dopen2(file_, path.c_str(), H5P_DEFAULT);
  const hid_t type = ds >= 0 ? H5Dget_type(ds) : -1;
  const bool text = type >= 0 && H5Tget_class(type) == H5T_STRING && !H5Tis_variable_str(type);
  const std::size_t size = text ? H5Tget_size(type) : 0;
  if (type >= 0) H5Tclose(type);
  if (ds >= 0) H5Dclose(ds);
  if (!text) throw IoError(fmt::format("{}: '{}' is not a fixed-length string dataset", path_, path));
  std::string buf(size + 1, '\0');
  if (H5LTread_dataset_string(file_, path.c_str(), buf.data()) < 0)
    throw IoError(fmt::format("{}: cannot read '{}'", path_, path));
  return std::string(buf.c_str());
}

}  // namespace kestrel
