// HDF5 writer (see hdf5.hpp).
#include "io/hdf5.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <gsl/gsl_version.h>
#include <hdf5_hl.h>
#include <oneapi/tbb/version.h>
#include <unistd.h>
#include <boost/version.hpp>
#include <nlohmann/json.hpp>

#include "core/blas_core.hpp"
#include "core/error.hpp"
#include "io/output.hpp"

namespace kestrel {

namespace {
void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw IoError("HDF5: failed to " + what);
}
}  // namespace

H5Writer::H5Writer(std::string path, bool replace) : path_(std::move(path)), replace_(replace) {
  namespace fs = std::filesystem;
  const fs::path target(path_);
  if (target.has_parent_path() && !fs::exists(target.parent_path()))
    throw IoError(
        fmt::format("cannot write '{}': directory '{}' does not exist", path_, target.parent_path().string()));
  tmp_ = temp_beside(path_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported through exceptions
  register_temp_file(tmp_);
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) {
    unregister_temp_file(tmp_);
    throw IoError(fmt::format("cannot create HDF5 file '{}': {}", tmp_, std::strerror(errno)));
  }
}

H5Writer::~H5Writer() {
  if (file_ >= 0) {
    H5Fclose(file_);
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
    unregister_temp_file(tmp_);
  }
}

void H5Writer::group(const std::string& path) {
  if (path == "/" || path.empty()) return;
  std::string prefix;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    prefix += "/" + part;
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) > 0) continue;
    const hid_t g = H5Gcreate2(file_, prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) throw IoError("HDF5: cannot create group " + prefix);
    H5Gclose(g);
  }
}

void H5Writer::copy(const std::string& file, const std::string& path) {
  const hid_t src = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (src < 0) throw IoError("HDF5: cannot open " + file + " to copy " + path + " from it");
  group(path.substr(0, path.rfind('/')));
  const herr_t rc = H5Ocopy(src, path.c_str(), file_, path.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(src);
  check(rc, "copy " + path + " from " + file);
}

namespace {
// kestrel never writes NaN or Inf: a non-finite result is a bug upstream, reported with the dataset's name.
void require_finite(const double* p, std::size_t n, const std::string& path) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw NumericalError(
          fmt::format("refusing to write non-finite value {} at index {} of dataset {}", p[i], i, path));
}
}  // namespace

void H5Writer::write(const std::string& path, const std::vector<double>& v, const Meaning& m) {
  require_finite(v.data(), v.size(), path);
  group(std::filesystem::path(path).parent_path().string());
  const hsize_t dims[1] = {v.size()};
  check(H5LTmake_dataset_double(file_, path.c_str(), 1, dims, v.data()), "write dataset " + path);
  describe(path, m);
}

void H5Writer::write(const std::string& path, const arma::vec& v, const Meaning& m) {
  write(path, arma::conv_to<std::vector<double>>::from(v), m);
}

void H5Writer::write(const std::string& path, const arma::mat& m, const Meaning& meaning) {
  require_finite(m.memptr(), m.n_elem, path);
  group(std::filesystem::path(path).parent_path().string());
  const arma::mat row_major = m.t();  // Armadillo is column-major; HDF5 readers expect row-major
  const hsize_t dims[2] = {m.n_rows, m.n_cols};
  check(H5LTmake_dataset_double(file_, path.c_str(), 2, dims, row_major.memptr()), "write dataset " + path);
  describe(path, meaning);
}

void H5Writer::write(const std::string& path, const std::vector<std::int64_t>& v, const Meaning& m) {
  group(std::filesystem::path(path).parent_path().string());
  const hsize_t dims[1] = {v.size()};
  static_assert(sizeof(long long) == sizeof(std::int64_t));
  check(H5LTmake_dataset(file_, path.c_str(), 1, dims, H5T_NATIVE_LLONG, v.data()), "write dataset " + path);
  describe(path, m);
}

void H5Writer::describe(const std::string& path, const Meaning& m) {
  attr(path, "description", m.description);
  attr(path, "axes", m.axes);
  H5T_class_t cls{};
  check(H5LTget_dataset_info(file_, path.c_str(), nullptr, &cls, nullptr), "read dataset " + path);
  if (!m.units.empty() && cls != H5T_STRING) attr(path, "units", m.units);  // text has no units
}

void H5Writer::write_text(const std::string& path, const std::string& text, const Meaning& m) {
  group(std::filesystem::path(path).parent_path().string());
  check(H5LTmake_dataset_string(file_, path.c_str(), text.c_str()), "write dataset " + path);
  describe(path, m);
}

void H5Writer::attr(const std::string& obj, const std::string& name, const std::string& value) {
  if (value.size() > 60000)
    throw IoError(fmt::format("HDF5: attribute {} of {} bytes is too large for an attribute (use a dataset)", name,
                              value.size()));
  check(H5LTset_attribute_string(file_, obj.c_str(), name.c_str(), value.c_str()), "write attribute " + name);
}
void H5Writer::attr(const std::string& obj, const std::string& name, double value) {
  require_finite(&value, 1, obj + ":" + name);
  check(H5LTset_attribute_double(file_, obj.c_str(), name.c_str(), &value, 1), "write attribute " + name);
}
void H5Writer::attr(const std::string& obj, const std::string& name, std::int64_t value) {
  const long long v = value;
  check(H5LTset_attribute_long_long(file_, obj.c_str(), name.c_str(), &v, 1), "write attribute " + name);
}

void H5Writer::attr(const std::string& obj, const std::string& name, std::uint64_t value) {
  static_assert(sizeof(unsigned long) == sizeof(std::uint64_t));
  const unsigned long v = value;
  check(H5LTset_attribute_ulong(file_, obj.c_str(), name.c_str(), &v, 1), "write attribute " + name);
}

void H5Writer::commit() {
  check(H5Fclose(file_), "close " + tmp_);
  file_ = -1;
  try {
    publish_output(tmp_, path_, replace_);  // removes tmp_ if it fails
  } catch (...) {
    unregister_temp_file(tmp_);
    throw;
  }
  unregister_temp_file(tmp_);
}

std::string library_versions() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  nlohmann::json j = {
      {"armadillo", arma::arma_version::as_string()},
      {"gsl", GSL_VERSION},
      {"hdf5", fmt::format("{}.{}.{}", maj, min, rel)},
      {"tbb", fmt::format("{}.{} (runtime interface {})", TBB_VERSION_MAJOR, TBB_VERSION_MINOR,
                          TBB_runtime_interface_version())},
      {"boost", BOOST_LIB_VERSION},
      {"fmt", FMT_VERSION},
      {"nlohmann_json",
       fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH)},
      {"compiler", __VERSION__},
  };
  // OpenBLAS's kernel set decides the summation order inside matrix products (core/blas_core.hpp, issues 19 and 49).
  if (const std::string core = openblas_core(); !core.empty()) j["openblas_core"] = core;
  return j.dump();
}

}  // namespace kestrel
