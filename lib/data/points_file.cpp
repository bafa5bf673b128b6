// Points files for the `file` regime (see points_file.hpp): text via the UCI parser, .npy (format versions
// 1-3, little-endian integer or float arrays, C or Fortran order), HDF5 datasets through the C API.
#include "data/points_file.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <hdf5.h>

#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/uci.hpp"

namespace kestrel {

namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputFileError(fmt::format("{}: cannot open points file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

// Comma or whitespace separated rows; a first line without any number is a header and skipped.
arma::mat load_text(const std::string& path) {
  std::string text = read_all(path);
  const std::string first = text.substr(0, text.find('\n'));
  const char delim = first.find(',') != std::string::npos ? ',' : ' ';
  std::vector<std::string> fields;
  {
    std::stringstream fs(first);
    std::string tok;
    if (delim == ',')
      while (std::getline(fs, tok, ',')) fields.push_back(tok);
    else
      while (fs >> tok) fields.push_back(tok);
  }
  for (auto& f : fields) {
    f.erase(0, f.find_first_not_of(" \t\r\""));
    f.erase(f.find_last_not_of(" \t\r\"") + 1);
  }
  if (fields.empty()) throw InputFileError(fmt::format("{}: line 1: no fields", path));
  bool header = true;
  for (const auto& f : fields) header = header && !is_number(f);
  if (header) text = text.find('\n') == std::string::npos ? "" : text.substr(text.find('\n') + 1);
  const UciSpec spec{"file", path, delim, std::vector<Column>(fields.size(), Column::Numeric)};
  try {
    return parse_uci(text, spec, Encoding::Ordinal, path).X;
  } catch (const IoError& e) {
    throw InputFileError(e.what());
  }
}

// The value of `key` in the .npy header dict, e.g. 'descr': '<f8' -> <f8.
std::string npy_field(const std::string& header, const std::string& key, const std::string& path) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) throw InputFileError(fmt::format("{}: .npy header has no '{}'", path, key));
  auto v = header.find(':', k) + 1;
  while (v < header.size() && header[v] == ' ') ++v;
  const char open = header[v];
  const char close = open == '\'' ? '\'' : open == '(' ? ')' : ',';
  const auto e = header.find(close, v + 1);
  if (e == std::string::npos) throw InputFileError(fmt::format("{}: malformed .npy header", path));
  return open == '\'' || open == '(' ? header.substr(v + 1, e - v - 1) : header.substr(v, e - v);
}

template <typename T>
void convert(const char* data, std::size_t n, double* out) {
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

arma::mat load_npy(const std::string& path) {
  const std::string bytes = read_all(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw InputFileError(fmt::format("{}: not a .npy file (no \\x93NUMPY magic)", path));
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t hlen = 0, start = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputFileError(fmt::format("{}: truncated .npy header", path));
    for (int i = 0; i < 4; ++i) hlen |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    throw InputFileError(fmt::format("{}: .npy format version {} is not supported", path, major));
  }
  if (start + hlen > bytes.size()) throw InputFileError(fmt::format("{}: truncated .npy header", path));
  const std::string header = bytes.substr(start, hlen);
  const std::string descr = npy_field(header, "descr", path);
  const bool fortran = npy_field(header, "fortran_order", path).find("True") != std::string::npos;
  std::vector<std::size_t> shape;
  {
    std::stringstream ss(npy_field(header, "shape", path));
    std::string tok;
    while (std::getline(ss, tok, ','))
      if (tok.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoull(tok));
  }
  if (shape.size() != 2)
    throw InputFileError(fmt::format("{}: the array has {} dimensions; points need a 2-D array (one point per row)",
                                     path, shape.size()));
  const std::size_t n = shape[0], d = shape[1], count = n * d;
  if (descr.size() < 3 || descr[0] == '>' || (descr[0] != '<' && descr[0] != '|'))
    throw InputFileError(
        fmt::format("{}: dtype '{}' is not supported (little-endian integers or floats)", path, descr));
  const std::string t = descr.substr(1);
  const std::map<std::string, std::size_t> sizes = {{"f8", 8}, {"f4", 4}, {"i8", 8}, {"i4", 4}, {"i2", 2},
                                                    {"i1", 1}, {"u8", 8}, {"u4", 4}, {"u2", 2}, {"u1", 1}};
  if (!sizes.count(t))
    throw InputFileError(
        fmt::format("{}: dtype '{}' is not supported (little-endian integers or floats)", path, descr));
  const std::size_t data = start + hlen;
  if (bytes.size() - data < count * sizes.at(t))
    throw InputFileError(fmt::format("{}: {} x {} array needs {} bytes of data, the file has {}", path, n, d,
                                     count * sizes.at(t), bytes.size() - data));
  // C order stores row i (a point) contiguously: exactly a d x n column-major matrix.
  arma::mat m(fortran ? n : d, fortran ? d : n);
  const char* p = bytes.data() + data;
  double* o = m.memptr();
  if (t == "f8")
    convert<double>(p, count, o);
  else if (t == "f4")
    convert<float>(p, count, o);
  else if (t == "i8")
    convert<std::int64_t>(p, count, o);
  else if (t == "i4")
    convert<std::int32_t>(p, count, o);
  else if (t == "i2")
    convert<std::int16_t>(p, count, o);
  else if (t == "i1")
    convert<std::int8_t>(p, count, o);
  else if (t == "u8")
    convert<std::uint64_t>(p, count, o);
  else if (t == "u4")
    convert<std::uint32_t>(p, count, o);
  else if (t == "u2")
    convert<std::uint16_t>(p, count, o);
  else
    convert<std::uint8_t>(p, count, o);
  return fortran ? arma::mat(m.t()) : m;
}

arma::mat load_h5(const std::string& path, const std::string& dataset) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (!fs::exists(path)) throw InputFileError(fmt::format("{}: cannot open points file", path));
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw InputFileError(fmt::format("{}: not an HDF5 file", path));
  const hid_t ds = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  if (ds < 0) {
    H5Fclose(f);
    throw InputFileError(fmt::format("{}: no dataset '{}'", path, dataset));
  }
  const hid_t space = H5Dget_space(ds), type = H5Dget_type(ds);
  const int rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[2] = {0, 0};
  const H5T_class_t cls = H5Tget_class(type);
  std::string err;
  arma::mat m;
  if (rank != 2)
    err = fmt::format("{}:{}: the dataset has {} dimensions; points need a 2-D dataset (one point per row)", path,
                      dataset, rank);
  else if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    err = fmt::format("{}:{}: the dataset is not numeric", path, dataset);
  if (err.empty()) {
    H5Sget_simple_extent_dims(space, dims, nullptr);
    m.set_size(dims[1], dims[0]);  // row-major n x d on disk = column-major d x n
    if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.memptr()) < 0)
      err = fmt::format("{}:{}: cannot read the dataset", path, dataset);
  }
  H5Tclose(type), H5Sclose(space), H5Dclose(ds), H5Fclose(f);
  if (!err.empty()) throw InputFileError(err);
  return m;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::shared_ptr<const PointsFile> load_points(const std::string& spec) {
  auto pf = std::make_shared<PointsFile>();
  pf->spec = spec;
  pf->path = spec;
  std::string dataset;
  for (const char* ext : {".h5:", ".hdf5:", ".hdf:"}) {
    const auto pos = spec.rfind(ext);
    if (pos != std::string::npos) {
      pf->path = spec.substr(0, pos + std::strlen(ext) - 1);
      dataset = spec.substr(pos + std::strlen(ext));
      break;
    }
  }
  std::error_code ec;
  if (!fs::is_regular_file(pf->path, ec))
    throw InputFileError(fmt::format("{}: cannot open points file ({})", pf->path,
                                     fs::exists(pf->path, ec) ? "not a regular file" : "no such file"));
  if (dataset.empty() && (ends_with(pf->path, ".h5") || ends_with(pf->path, ".hdf5")))
    throw InputFileError(fmt::format("{}: name the dataset as {}:/path/to/dataset", pf->path, pf->path));
  const auto key = fmt::format("{}|{}|{}", spec, fs::file_size(pf->path, ec),
                               fs::last_write_time(pf->path, ec).time_since_epoch().count());
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const PointsFile>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  pf->points = !dataset.empty()              ? load_h5(pf->path, dataset)
               : ends_with(pf->path, ".npy") ? load_npy(pf->path)
                                             : load_text(pf->path);
  if (pf->points.n_rows == 0 || pf->points.n_cols < 2)
    throw InputFileError(fmt::format("{}: {} points of dimension {}; at least 2 points are needed", spec,
                                     pf->points.n_cols, pf->points.n_rows));
  if (!pf->points.is_finite()) {
    const arma::uvec bad = arma::find_nonfinite(pf->points);
    throw InputFileError(fmt::format("{}: the value in row {}, column {} is not finite", spec,
                                     bad(0) / pf->points.n_rows + 1, bad(0) % pf->points.n_rows + 1));
  }
  pf->sha256 = sha256_file(pf->path);
  cache[key] = pf;
  return pf;
}

}  // namespace kestrel
