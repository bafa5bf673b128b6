// One column table type for the records a user reads: a record (a row type, read with a context such as the options)
// is declared once as a list of Column<Row, Ctx>, and its JSON object, its HDF5 datasets and attributes, the command
// line's table cells and the docs' field list are all written from that list by the functions below.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kestrel {

// How the command line's table shows a column: not at all, as text, the text's first word or a percentage.
enum class Cell { None, Text, FirstWord, Percent };

template <typename Row, typename Ctx>
struct Column {
  enum Where { Json = 1, Dataset = 2, Attribute = 4 };
  using Value = std::optional<nlohmann::json> (*)(const Row&, const Ctx&);
  const char* key;        // JSON key ("a/b": key b of the record's object a); in HDF5 the key with '/' as '_'
  const char* help;       // what it is (the HDF5 description, the docs)
  int where = 0;          // Json | Dataset | Attribute (0: the command line's table only)
  Value value = nullptr;  // nullopt: the record has none (left out; an HDF5 attribute that is null holds 0)
  const char* axis = "";  // HDF5 datasets: the name of their one axis
  Cell cell = Cell::None;
  const char* format = "";  // the table's fmt spec of the cell and of its header, with the leading space(s)
  const char* header = "";  // the table's header
};

// The HDF5 name of a column: its key with '/' as '_'.
template <typename Row, typename Ctx>
std::string h5_name(const Column<Row, Ctx>& c) {
  std::string n = c.key;
  std::replace(n.begin(), n.end(), '/', '_');
  return n;
}

// Adds the record's JSON columns to j (an object): "a/b" inside object a; columns without a value are left out.
template <typename Row, typename Ctx>
void put_json(nlohmann::json& j, const Row& r, const Ctx& ctx, const std::vector<Column<Row, Ctx>>& columns) {
  for (const auto& c : columns) {
    if (!(c.where & Column<Row, Ctx>::Json)) continue;
    std::optional<nlohmann::json> v = c.value(r, ctx);
    if (!v) continue;
    const std::string key = c.key;
    const auto slash = key.find('/');
    if (slash == std::string::npos) {
      j[key] = std::move(*v);
    } else {
      nlohmann::json& group = j[key.substr(0, slash)];
      if (group.is_null()) group = nlohmann::json::object();
      group[key.substr(slash + 1)] = std::move(*v);
    }
  }
}

// Writes the record's Dataset columns (1-D, real) into `group`, then its Attribute columns on it: text, reals, and
// integers (null as 0). H5: io/hdf5.hpp's H5Writer (a parameter, so that this header does not include HDF5's).
template <typename H5, typename Row, typename Ctx>
void write_columns(H5& h5, const std::string& group, const Row& r, const Ctx& ctx,
                   const std::vector<Column<Row, Ctx>>& columns) {
  for (const auto& c : columns)
    if (c.where & Column<Row, Ctx>::Dataset) {
      const std::optional<nlohmann::json> v = c.value(r, ctx);
      if (v) h5.write(group + "/" + h5_name(c), v->template get<std::vector<double>>(), {c.help, c.axis});
    }
  for (const auto& c : columns) {
    if (!(c.where & Column<Row, Ctx>::Attribute)) continue;
    const std::optional<nlohmann::json> v = c.value(r, ctx);
    if (!v) continue;
    if (v->is_string())
      h5.attr(group, h5_name(c), v->template get<std::string>());
    else if (v->is_number_float())
      h5.attr(group, h5_name(c), v->template get<double>());
    else
      h5.attr(group, h5_name(c), v->is_null() ? std::int64_t{0} : v->template get<std::int64_t>());
  }
}

// The command line's cell of a column (its value as text, first word or percentage), formatted by c.format.
template <typename Row, typename Ctx>
std::string text_cell(const Column<Row, Ctx>& c, const Row& r, const Ctx& ctx) {
  const nlohmann::json v = c.value(r, ctx).value_or(nullptr);
  std::string text;
  if (c.cell == Cell::Percent)
    text = fmt::format("{:.3g}%", 100 * v.get<double>());
  else if (v.is_string())
    text = c.cell == Cell::FirstWord ? v.get<std::string>().substr(0, v.get<std::string>().find(' '))
                                     : v.get<std::string>();
  else
    text = v.dump();
  return fmt::format(fmt::runtime(c.format), text);
}

// "\n  key: help" for each JSON column (the Python docstrings and the docs' field lists).
template <typename Row, typename Ctx>
std::string json_fields(const std::vector<Column<Row, Ctx>>& columns) {
  std::string doc;
  for (const auto& c : columns)
    if (c.where & Column<Row, Ctx>::Json) doc += fmt::format("\n  {}: {}", c.key, c.help);
  return doc;
}

}  // namespace kestrel
