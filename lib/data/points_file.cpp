// Points files for the `file` regime (see points_file.hpp): text via the UCI parser, .npy (format versions
// 1-3, little-endian integer or float arrays, C or Fortran order), HDF5 datasets through core/hdf5_reader.hpp (stacks
// of heads: their dimension labels).
#include "data/points_file.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
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

// What a file that is not text looks like, from its first bytes ("" when it looks like text): known binary formats by
// their magic numbers, anything else with a NUL byte or a control character by the first such byte.
std::string binary_kind(const std::string& path, const std::string& bytes) {
  const auto starts = [&](std::string_view magic) { return bytes.compare(0, magic.size(), magic) == 0; };
  const std::string_view h5("\x89HDF\r\n\x1a\n", 8), npy("\x93NUMPY", 6), gz("\x1f\x8b", 2), zip("PK\x03\x04", 4);
  if (starts(h5)) return fmt::format("an HDF5 file: name one of its datasets as {}:/path/to/dataset", path);
  if (starts(npy)) return "a NumPy .npy array: give it a name ending in .npy";
  if (starts(gz)) return "a gzip-compressed file: decompress it first";
  if (starts(std::string_view("\xff\xfe", 2)) || starts(std::string_view("\xfe\xff", 2)))
    return "UTF-16 text (a byte-order mark 0xff 0xfe or 0xfe 0xff): save it as UTF-8 or ASCII CSV";
  if (starts(zip)) return "a zip archive (an .npz or a spreadsheet?): save the points as CSV or .npy";
  const std::size_t n = std::min<std::size_t>(bytes.size(), 4096);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0 || (c < 32 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v'))
      return fmt::format("a binary file (byte {} is 0x{:02x}); points files are CSV/text, .npy or FILE.h5:/dataset",
                         i + 1, c);
  }
  return "";
}

// Whether a token is a number written with a decimal comma ("-1,5", "2,25e-3") or a plain integer; comma says which.
bool comma_number(const std::string& t, bool& comma) {
  const auto digit = [&](std::size_t i) { return std::isdigit(static_cast<unsigned char>(t[i])) != 0; };
  std::size_t i = t[0] == '-' || t[0] == '+' ? 1 : 0;
  const std::size_t m0 = i;
  while (i < t.size() && (digit(i) || t[i] == ',')) ++i;
  const std::string mantissa = t.substr(m0, i - m0);
  const auto commas = std::count(mantissa.begin(), mantissa.end(), ',');
  if (mantissa.empty() || commas > 1 || mantissa.front() == ',' || mantissa.back() == ',') return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    i += i + 1 < t.size() && (t[i + 1] == '-' || t[i + 1] == '+') ? 2 : 1;
    const std::size_t e0 = i;
    while (i < t.size() && digit(i)) ++i;
    if (i == e0) return false;
  }
  comma = commas == 1;
  return i == t.size();
}

// The first line whose fields, separated by ';' or whitespace, are all numbers and some have decimal commas
// ("1,5;2,25" or "1,5 2,25", as European spreadsheets export), as 'line N: "..."'; "" when there is none. Only
// called once parsing failed, to say what the file looks like.
std::string decimal_comma_line(const std::string& text) {
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1, ++line_no;
    std::vector<std::string> tokens;
    std::string tok;
    for (const char c : line + ";") {
      if (c == ';' || c == ' ' || c == '\t' || c == '\r') {
        if (!tok.empty()) tokens.push_back(tok), tok.clear();
      } else {
        tok += c;
      }
    }
    bool all = !tokens.empty(), some = false;
    for (const auto& t : tokens) {
      bool comma = false;
      all = all && comma_number(t, comma);
      some = some || comma;
    }
    if (all && some)
      return fmt::format("line {}: \"{}\"", line_no, line.size() > 40 ? line.substr(0, 40) + "..." : line);
  }
  return "";
}

// The first line (1-based) that ends with `delim` after trimming spaces and '\r': an empty last field, as a trailing
// comma gives; 0 when there is none. Only called once parsing failed, to say what the file looks like.
std::size_t trailing_delimiter_line(const std::string& text, char delim) {
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1, ++line_no;
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty() && line.back() == delim && delim == ',') return line_no;
  }
  return 0;
}

// Comma or whitespace separated rows; a first line without any number is a header and skipped, and lines starting
// with '#' are comments (as numpy.loadtxt reads them and np.savetxt's header writes them). Both are blanked, not
// removed, so that errors name the file's own line numbers. A UTF-8 byte-order mark (as spreadsheet programs write) is
// skipped; a binary file, one with decimal commas or with trailing commas is named as such.
arma::mat load_text(const std::string& path) {
  std::string text = read_all(path);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  if (const std::string kind = binary_kind(path, text); !kind.empty())
    throw InputFileError(fmt::format("{}: not a text points file: it looks like {}", path, kind));
  std::size_t first_at = std::string::npos;  // the first line that is neither blank nor a comment
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::size_t c = text.find_first_not_of(" \t\r", pos);
    if (c < end && text[c] == '#')
      std::fill(text.begin() + static_cast<std::ptrdiff_t>(pos), text.begin() + static_cast<std::ptrdiff_t>(end), ' ');
    else if (c < end && first_at == std::string::npos)
      first_at = pos;
    pos = end + 1;
  }
  if (first_at == std::string::npos)
    throw InputFileError(fmt::format("{}: no data lines (only blanks or comments)", path));
  const std::size_t first_end = std::min(text.find('\n', first_at), text.size());
  const std::string first = text.substr(first_at, first_end - first_at);
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
  bool header = true;
  for (const auto& f : fields) header = header && !is_number(f);
  if (header)
    std::fill(text.begin() + static_cast<std::ptrdiff_t>(first_at),
              text.begin() + static_cast<std::ptrdiff_t>(first_end), ' ');
  const UciSpec spec{"file", path, delim, std::vector<UciColumn>(fields.size(), UciColumn::Numeric)};
  try {
    return parse_uci(text, spec, Encoding::Ordinal, path).X;
  } catch (const IoError& e) {
    if (const std::string at = decimal_comma_line(text); !at.empty())
      throw InputFileError(
          fmt::format("{}: {} looks like numbers with decimal commas ('1,5' for 1.5); kestrel reads "
                      "decimal points, with ',' or whitespace between fields: export the file with "
                      "'.' as the decimal separator",
                      path, at));
    if (const std::size_t line = trailing_delimiter_line(text, delim))
      throw InputFileError(fmt::format(
          "{}: line {} ends with ',' (an empty last field): remove the trailing comma(s); fields are separated, not "
          "ended, by ','",
          path, line));
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
  if (open == '[') {  // a structured dtype's list of fields, returned whole with its brackets
    int depth = 0;
    for (std::size_t i = v; i < header.size(); ++i)
      if ((depth += header[i] == '[' ? 1 : header[i] == ']' ? -1 : 0) == 0) return header.substr(v, i - v + 1);
    throw InputFileError(fmt::format("{}: malformed .npy header", path));
  }
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

// lead: the leading axes of a 3-D to 5-D C-order array (read as its last two axes, stack after stack); 5 axes are
// [sequences, layers, heads, L, d], which advise --learned reads (tasks/advise/heads.hpp stack_sequences).
arma::mat load_npy(const std::string& path, bool stacked, std::vector<std::size_t>& lead) {
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
  if (descr.rfind('[', 0) == 0)
    throw InputFileError(fmt::format(
        "{}: a structured array (named fields {}) is not supported: save a plain 2-D float array, one point per row "
        "(numpy.lib.recfunctions.structured_to_unstructured converts it)",
        path, descr.size() > 60 ? descr.substr(0, 60) + "...]" : descr));
  if (shape.size() < 2 || shape.size() > (stacked ? 5u : 4u))
    throw InputFileError(fmt::format("{}: the array has {} dimensions; {}", path, shape.size(),
                                     stacked
                                         ? "tokens need a 2-D array [L, d] (one token per row) or a stack [heads, L, "
                                           "d] or [layers, heads, L, d] (with --learned: [sequences, ...] first)"
                                         : "points need a 2-D array (one point per row)"));
  if (shape.size() > 2 && fortran)
    throw InputFileError(
        fmt::format("{}: a {}-D array in Fortran order is not supported: save it in C order "
                    "(numpy.ascontiguousarray)",
                    path, shape.size()));
  lead.assign(shape.begin(), shape.end() - 2);
  std::size_t stacks = 1;
  for (std::size_t s : lead) stacks *= s;
  // A stacked C-order array is its stacks' n x d blocks one after another: one n x d array of all their rows.
  const std::size_t n = shape[shape.size() - 2] * stacks, d = shape.back(), count = n * d;
  const std::map<std::string, std::size_t> sizes = {{"f8", 8}, {"f4", 4}, {"i8", 8}, {"i4", 4}, {"i2", 2},
                                                    {"i1", 1}, {"u8", 8}, {"u4", 4}, {"u2", 2}, {"u1", 1}};
  const std::string t = descr.size() >= 3 ? descr.substr(1) : "";
  if ((descr[0] != '<' && descr[0] != '|') || !sizes.count(t)) {
    const std::map<std::string, std::string> names = {{"f2", "half-precision float"},
                                                      {"f16", "extended-precision float"},
                                                      {"c8", "complex"},
                                                      {"c16", "complex"},
                                                      {"b1", "boolean"},
                                                      {"O", "Python object"}};
    const std::string what = descr[0] == '>' ? "big-endian " : names.count(t) != 0 ? names.at(t) + " " : "";
    throw InputFileError(fmt::format(
        "{}: dtype '{}' ({}array) is not supported: kestrel reads little-endian float64, float32 and integer arrays; "
        "save it with X.astype('float64')",
        path, descr, what.empty() ? "unknown " : what));
  }
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

// The axis a dimension label names ("layers", "heads", "L", "d"; a few common spellings, any case), "" for none.
std::string axis_name(std::string label) {
  std::transform(label.begin(), label.end(), label.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::map<std::string, std::string> names = {{"layers", "layers"}, {"layer", "layers"}, {"heads", "heads"},
                                                    {"head", "heads"},    {"l", "L"},          {"tokens", "L"},
                                                    {"token", "L"},       {"seq", "L"},        {"sequence", "L"},
                                                    {"d", "d"},           {"dim", "d"},        {"head_dim", "d"}};
  const auto it = names.find(label);
  return it == names.end() ? "" : it->second;
}

// A 2-D dataset; where stacks are asked for, also a 3-D or 4-D one whose axes are named (HDF5 dimension labels, as
// h5py's dset.dims[k].label writes them) [heads, L, d] or [layers, heads, L, d], read as the .npy stacks (lead).
arma::mat load_h5(const std::string& path, const std::string& dataset, bool stacks, std::vector<std::size_t>& lead) {
  if (!fs::exists(path)) throw InputFileError(fmt::format("{}: cannot open points file", path));
  std::optional<H5Reader> f;
  try {
    f.emplace(path);
  } catch (const InputFileError&) {
    throw;  // a newer kestrel's file (core/schema.hpp)
  } catch (const IoError&) {
    throw InputFileError(fmt::format("{}: not an HDF5 file", path));
  }
  H5Reader::Shape s;
  try {
    s = f->shape(dataset);
  } catch (const IoError&) {
    throw InputFileError(fmt::format("{}: no dataset '{}'", path, dataset));
  }
  const std::size_t rank = s.dims.size();
  if (rank != 2 && !(stacks && (rank == 3 || rank == 4)))
    throw InputFileError(fmt::format("{}:{}: the dataset has {} dimensions; {}", path, dataset, rank,
                                     stacks ? "tokens need a 2-D dataset [L, d] (one token per row) or a stack [heads, "
                                              "L, d] or [layers, heads, L, d]"
                                            : "points need a 2-D dataset (one point per row)"));
  if (!s.numeric()) throw InputFileError(fmt::format("{}:{}: the dataset is not numeric", path, dataset));
  if (rank > 2) {
    const std::vector<std::string> want =
        rank == 4 ? std::vector<std::string>{"layers", "heads", "L", "d"} : std::vector<std::string>{"heads", "L", "d"};
    std::vector<std::string> got, named;
    for (const auto& g : s.labels) got.push_back(g.empty() ? "?" : g), named.push_back(axis_name(g));
    if (named != want)
      throw InputFileError(fmt::format(
          "{}:{}: a {}-D dataset needs its axes named [{}] (HDF5 dimension labels; h5py: dset.dims[0].label = '{}'), "
          "got [{}]",
          path, dataset, rank, fmt::join(want, ", "), want[0], fmt::join(got, ", ")));
  }
  lead.assign(s.dims.begin(), s.dims.end() - 2);
  std::vector<double> v;
  try {
    v = f->read_doubles(dataset);
  } catch (const IoError&) {
    throw InputFileError(fmt::format("{}:{}: cannot read the dataset", path, dataset));
  }
  const arma::uword d = s.dims.back();
  return arma::mat(v.data(), d, d ? v.size() / d : 0);  // row-major [..., n, d] = column-major d x (stacks * n)
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::shared_ptr<const PointsFile> load_points(const std::string& spec, bool stacks) {
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
  const auto refuse_stack = [&](const PointsFile& f) {
    if (!stacks && !f.lead.empty())
      throw InputFileError(fmt::format("{}: the array has {} dimensions; points need a 2-D array (one point per row)",
                                       f.path, f.lead.size() + 2));
  };
  if (auto it = cache.find(key); it != cache.end()) {
    refuse_stack(*it->second);
    return it->second;
  }
  pf->points = !dataset.empty()              ? load_h5(pf->path, dataset, stacks, pf->lead)
               : ends_with(pf->path, ".npy") ? load_npy(pf->path, stacks, pf->lead)
                                             : load_text(pf->path);
  refuse_stack(*pf);
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

std::string layout_note(const PointsFile& f) {
  if (f.points.n_cols >= f.points.n_rows) return "";
  return fmt::format(
      "{} has {} rows of {} values: read as {} points of dimension d = {} (one point per row); if its points are "
      "the columns, save its transpose",
      f.spec, f.points.n_cols, f.points.n_rows, f.points.n_cols, f.points.n_rows);
}

}  // namespace kestrel
