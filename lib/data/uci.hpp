// UCI data sets shipped under datasets/uci (CRT Table 1, HRF Table 1): delimited text with numeric
// and categorical attributes and a class (or, for Boston housing, a numeric target).
// Categorical attributes are one-hot encoded (default: one column per category, categories in
// lexicographic order) or ordinal encoded (the category's index in lexicographic order, so chess
// files a..h become 0..7). Lines may end in LF or CRLF; empty lines are skipped. Malformed input
// (non-numeric field, missing value '?', wrong number of fields, too few rows) throws IoError naming
// the file, the line and the problem.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <armadillo>

#include "core/enum_names.hpp"

namespace kestrel {

enum class UciColumn { Numeric, Categorical, Class, Target, Ignore };
enum class Encoding { OneHot, Ordinal };
template <>
struct EnumNames<Encoding> {
  static constexpr std::string_view what = "encoding";
  static constexpr std::array<EnumName<Encoding>, 2> names{
      {{Encoding::OneHot, "onehot"}, {Encoding::Ordinal, "ordinal"}}};
};
inline Encoding parse_encoding(const std::string& name) { return parse_enum<Encoding>(name); }

struct UciSpec {
  std::string name;
  std::string file;  // relative to the data directory
  char delimiter;    // ',' or ' ' (any run of spaces/tabs)
  std::vector<UciColumn> columns;
};

const std::vector<UciSpec>& uci_specs();
const UciSpec& find_uci(const std::string& name);  // InvalidArgument listing the names

struct UciData {
  std::string name;
  arma::mat X;                             // d x n, encoded attributes
  std::vector<std::string> feature_names;  // d names ("col3=vhigh" for one-hot columns)
  arma::uvec labels;                       // class index per row (classification sets)
  std::vector<std::string> classes;        // class names, lexicographic order
  arma::vec target;                        // numeric target (regression sets)
};

// Parses the text of a data set with the given schema; source names the file in messages.
UciData parse_uci(std::string_view text, const UciSpec& spec, Encoding enc, const std::string& source);
UciData load_uci(const std::string& data_dir, const std::string& name, Encoding enc = Encoding::OneHot);

// Fixed-seed 90% / 5% / 5% split (train / validation / test), as CRT 9.10.2 and DERF B.3.
struct Split {
  arma::uvec train, validation, test;
};
Split split_90_5_5(arma::uword n, std::uint64_t seed);

// Standardisation fitted on the training columns: x -> (x - mean) / std; a constant feature
// (std = 0) is only centred.
struct Standardizer {
  arma::vec mean, scale;
  static Standardizer fit(const arma::mat& train);
  arma::mat apply(const arma::mat& X) const;
};

}  // namespace kestrel
