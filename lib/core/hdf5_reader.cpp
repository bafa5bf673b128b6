// The HDF5 reader (see hdf5_reader.hpp).
#include "core/hdf5_reader.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <hdf5_hl.h>

#include "core/error.hpp"
#include "core/schema.hpp"

namespace kestrel {

H5Reader::H5Reader(const std::string& path) : path_(path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported through exceptions
  file_ = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw IoError(fmt::format("cannot open HDF5 file '{}'", path_));
  std::string schema, version;
  try {
    schema = attr_string("/", "schema"), version = attr_string("/", "schema_version");
  } catch (const IoError&) {
    return;  // not a kestrel output (or an older kestrel's): the readers' own checks apply
  }
  try {
    check_schema("'" + path_ + "'", schema, version);
  } catch (...) {
    H5Fclose(file_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

bool H5Reader::has_attr(const std::string& obj, const std::string& name) const {
  return (obj == "/" || exists(obj)) && H5Aexists_by_name(file_, obj.c_str(), name.c_str(), H5P_DEFAULT) > 0;
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

H5Reader::Shape H5Reader::shape(const std::string& dataset) const {
  const hid_t ds = exists(dataset) ? H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT) : -1;
  if (ds < 0) throw IoError(fmt::format("'{}': no dataset {}", path_, dataset));
  const hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
  Shape s;
  s.type = H5Tget_class(type);
  s.dims.resize(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
  H5Sget_simple_extent_dims(space, s.dims.data(), nullptr);
  for (std::size_t k = 0; k < s.dims.size(); ++k) {
    char label[64] = {0};
    const auto n = H5DSget_label(ds, static_cast<unsigned>(k), label, sizeof label);
    s.labels.push_back(n > 0 ? std::string(label) : "");
  }
  H5Tclose(type), H5Sclose(space), H5Dclose(ds);
  return s;
}

std::vector<double> H5Reader::read_doubles(const std::string& dataset) const {
  const Shape s = shape(dataset);
  if (!s.numeric()) throw IoError(fmt::format("'{}': dataset {} is not numeric", path_, dataset));
  std::size_t n = 1;
  for (const auto d : s.dims) n *= d;
  std::vector<double> v(n);
  const hid_t ds = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
  const herr_t rc = H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(ds);
  if (rc < 0) throw IoError(fmt::format("'{}': cannot read dataset {}", path_, dataset));
  return v;
}

std::vector<double> H5Reader::read_float(const std::string& path, std::size_t rank, std::vector<hsize_t>& dims) const {
  const H5Reader::Shape s = shape(path);
  if (s.type != H5T_FLOAT) throw IoError(fmt::format("'{}': dataset {} is not a floating-point dataset", path_, path));
  if (s.dims.size() != rank)
    throw IoError(fmt::format("'{}': dataset {} has rank {}, expected {}", path_, path, s.dims.size(), rank));
  dims = s.dims;
  return read_doubles(path);
}

arma::vec H5Reader::read_vec(const std::string& path) const {
  std::vector<hsize_t> dims;
  return arma::vec(read_float(path, 1, dims));
}

arma::mat H5Reader::read_mat(const std::string& path) const {
  std::vector<hsize_t> dims;
  const std::vector<double> v = read_float(path, 2, dims);
  // HDF5 is row-major: the values are the transpose's, column-major
  return arma::mat(v.data(), dims[1], dims[0]).t();
}

std::string H5Reader::attr_string(const std::string& obj, const std::string& name) const {
  hsize_t dims = 0;
  H5T_class_t cls{};
  std::size_t size = 0;
  if (H5LTget_attribute_info(file_, obj.c_str(), name.c_str(), &dims, &cls, &size) < 0 || cls != H5T_STRING)
    throw IoError(fmt::format("'{}': no string attribute {} on {}", path_, name, obj));
  if (std::string v; variable_string(obj, name, v)) return v;
  std::string s(size, '\0');
  if (H5LTget_attribute_string(file_, obj.c_str(), name.c_str(), s.data()) < 0)
    throw IoError(fmt::format("'{}': cannot read attribute {} of {}", path_, name, obj));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

bool H5Reader::variable_string(const std::string& obj, const std::string& name, std::string& value) const {
  const hid_t attr = H5Aopen_by_name(file_, obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  const hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
  const hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
  const bool variable = type >= 0 && H5Tis_variable_str(type) > 0 && H5Sget_simple_extent_npoints(space) == 1;
  bool read = false;
  if (variable) {
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    char* text = nullptr;
    read = H5Aread(attr, mem, &text) >= 0;
    if (read) value = text ? text : "";
    if (text) H5free_memory(text);
    H5Tclose(mem);
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (attr >= 0) H5Aclose(attr);
  if (variable && !read) throw IoError(fmt::format("'{}': cannot read attribute {} of {}", path_, name, obj));
  return variable;
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
