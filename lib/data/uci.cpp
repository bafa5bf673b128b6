// UCI parsers, encodings, splits and standardisation (see uci.hpp).
#include "data/uci.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gsl/gsl_randist.h>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace kestrel {

const std::vector<UciSpec>& uci_specs() {
  using C = UciColumn;
  static const std::vector<UciSpec> specs = {
      {"abalone",
       "uci/abalone/abalone.data",
       ',',
       {C::Categorical, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Class}},
      {"banknote",
       "uci/banknote/data_banknote_authentication.txt",
       ',',
       {C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Class}},
      {"car",
       "uci/car/car.data",
       ',',
       {C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Class}},
      {"yeast",
       "uci/yeast/yeast.data",
       ' ',
       {C::Ignore, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric,
        C::Class}},
      // cmc's attributes are integer codes (education levels, occupation, binary flags): numeric.
      {"cmc",
       "uci/cmc/cmc.data",
       ',',
       {C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric,
        C::Class}},
      {"nursery",
       "uci/nursery/nursery.data",
       ',',
       {C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Categorical, C::Categorical,
        C::Categorical, C::Class}},
      {"wifi",
       "uci/wifi/wifi_localization.txt",
       ' ',
       {C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Class}},
      // chess (king-rook vs king): files a..h are categorical, ranks numeric, the class is the depth.
      {"chess",
       "uci/krkopt/krkopt.data",
       ',',
       {C::Categorical, C::Numeric, C::Categorical, C::Numeric, C::Categorical, C::Numeric, C::Class}},
      {"wine",
       "uci/wine/wine.data",
       ',',
       {C::Class, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric,
        C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric}},
      {"boston",
       "uci/boston_housing/housing.data",
       ' ',
       {C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Numeric,
        C::Numeric, C::Numeric, C::Numeric, C::Numeric, C::Target}},
  };
  return specs;
}

const UciSpec& find_uci(const std::string& name) {
  std::string known;
  for (const auto& s : uci_specs()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw InvalidArgument(fmt::format("unknown UCI data set '{}' (known: {})", name, known));
}

namespace {

std::vector<std::string_view> split_fields(std::string_view line, char delim) {
  std::vector<std::string_view> out;
  if (delim == ' ') {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i == line.size()) break;
      std::size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      out.push_back(line.substr(i, j - i));
      i = j;
    }
  } else {
    std::size_t i = 0;
    while (true) {
      const std::size_t j = line.find(delim, i);
      out.push_back(line.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
      if (j == std::string_view::npos) break;
      i = j + 1;
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The data lines of a UCI text: every field trimmed, none empty or missing ('?'), nc per line, at least 2 lines.
struct UciRows {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::size_t> line_of;  // the line number of each row, for errors
};

UciRows read_rows(std::string_view text, const UciSpec& spec, const std::string& source) {
  const std::size_t nc = spec.columns.size();
  UciRows out;
  auto& rows = out.rows;
  auto& line_of = out.line_of;
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    const auto f = split_fields(line, spec.delimiter);
    if (f.size() != nc)
      throw IoError(fmt::format("{}: line {}: {} fields, expected {}", source, line_no, f.size(), nc));
    std::vector<std::string> row;
    for (std::size_t c = 0; c < nc; ++c) {
      const std::string_view v = trim(f[c]);
      if (v.empty()) throw IoError(fmt::format("{}: line {}: field {} is empty", source, line_no, c + 1));
      if (v == "?") throw IoError(fmt::format("{}: line {}: field {} is a missing value '?'", source, line_no, c + 1));
      row.emplace_back(v);
    }
    rows.push_back(std::move(row));
    line_of.push_back(line_no);
  }
  if (rows.size() < 2) throw IoError(fmt::format("{}: {} data rows, need at least 2", source, rows.size()));

  return out;
}

// Category sets (lexicographic) for categorical and class columns.
std::vector<std::vector<std::string>> categories(const std::vector<std::vector<std::string>>& rows,
                                                 const UciSpec& spec) {
  const std::size_t nc = spec.columns.size();
  std::vector<std::vector<std::string>> cats(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    if (spec.columns[c] != UciColumn::Categorical && spec.columns[c] != UciColumn::Class) continue;
    std::set<std::string> s;
    for (const auto& r : rows) s.insert(r[c]);
    cats[c].assign(s.begin(), s.end());
  }
  return cats;
}

}  // namespace

UciData parse_uci(std::string_view text, const UciSpec& spec, Encoding enc, const std::string& source) {
  const std::size_t nc = spec.columns.size();
  const UciRows read = read_rows(text, spec, source);
  const auto& rows = read.rows;
  const auto& line_of = read.line_of;
  const std::vector<std::vector<std::string>> cats = categories(rows, spec);
  UciData out;
  out.name = spec.name;
  for (std::size_t c = 0; c < nc; ++c) {
    if (spec.columns[c] == UciColumn::Numeric) out.feature_names.push_back(fmt::format("col{}", c + 1));
    if (spec.columns[c] == UciColumn::Categorical) {
      if (enc == Encoding::Ordinal)
        out.feature_names.push_back(fmt::format("col{}", c + 1));
      else
        for (const auto& v : cats[c]) out.feature_names.push_back(fmt::format("col{}={}", c + 1, v));
    }
    if (spec.columns[c] == UciColumn::Class) out.classes = cats[c];
  }
  const std::size_t n = rows.size();
  out.X.zeros(out.feature_names.size(), n);
  const bool has_class = !out.classes.empty();
  if (has_class) out.labels.set_size(n);
  bool has_target = false;
  for (auto k : spec.columns) has_target |= k == UciColumn::Target;
  if (has_target) out.target.set_size(n);

  auto number = [&](const std::string& s, std::size_t r, std::size_t c) {
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
      throw IoError(fmt::format("{}: line {}: field {} is not a finite number: '{}'", source, line_of[r], c + 1, s));
    return v;
  };
  for (std::size_t r = 0; r < n; ++r) {
    arma::uword f = 0;
    for (std::size_t c = 0; c < nc; ++c) {
      const std::string& v = rows[r][c];
      switch (spec.columns[c]) {
        case UciColumn::Numeric:
          out.X(f++, r) = number(v, r, c);
          break;
        case UciColumn::Categorical: {
          const auto idx = std::lower_bound(cats[c].begin(), cats[c].end(), v) - cats[c].begin();
          if (enc == Encoding::Ordinal)
            out.X(f++, r) = static_cast<double>(idx);
          else {
            out.X(f + idx, r) = 1.0;
            f += cats[c].size();
          }
          break;
        }
        case UciColumn::Class:
          out.labels(r) = std::lower_bound(cats[c].begin(), cats[c].end(), v) - cats[c].begin();
          break;
        case UciColumn::Target:
          out.target(r) = number(v, r, c);
          break;
        case UciColumn::Ignore:
          break;
      }
    }
  }
  return out;
}

UciData load_uci(const std::string& data_dir, const std::string& name, Encoding enc) {
  const UciSpec& spec = find_uci(name);
  const std::string path = data_dir + "/" + spec.file;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(fmt::format("{}: cannot open file (UCI data set '{}')", path, name));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_uci(ss.str(), spec, enc, path);
}

Split split_90_5_5(arma::uword n, std::uint64_t seed) {
  require(n >= 20, "a 90/5/5 split needs at least 20 rows, got {}", n);
  std::vector<arma::uword> idx(n);
  for (arma::uword i = 0; i < n; ++i) idx[i] = i;
  Rng rng(seed, Stream::Data, 0x5917);
  gsl_ran_shuffle(rng.raw(), idx.data(), n, sizeof(arma::uword));
  const arma::uword n_val = n / 20, n_test = n / 20, n_train = n - n_val - n_test;
  const arma::uvec all(idx);
  return {arma::sort(all.head(n_train)), arma::sort(all.subvec(n_train, n_train + n_val - 1)),
          arma::sort(all.tail(n_test))};
}

Standardizer Standardizer::fit(const arma::mat& train) {
  require(train.n_cols >= 2, "standardisation needs at least 2 training points, got {}", train.n_cols);
  Standardizer s;
  s.mean = arma::mean(train, 1);
  s.scale = arma::stddev(train, 0, 1);
  s.scale.transform([](double v) { return v > 0 ? v : 1.0; });
  return s;
}

arma::mat Standardizer::apply(const arma::mat& X) const {
  require(X.n_rows == mean.n_elem, "standardiser fitted for d = {}, got d = {}", mean.n_elem, X.n_rows);
  arma::mat Z = X.each_col() - mean;
  Z.each_col() /= scale;
  return Z;
}

}  // namespace kestrel
