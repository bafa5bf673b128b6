// Enum <-> name, declared once per enum: a specialisation of EnumNames beside the enum lists {value, name} pairs (in
// the order an error message should offer them) and what the value is called; name_of and parse_enum read it.
//   template <> struct EnumNames<Sampler> {
//     static constexpr std::string_view what = "sampler";
//     static constexpr std::array<EnumName<Sampler>, 2> names{{{Sampler::Iid, "iid"}, {Sampler::Orthogonal,
//     "orthogonal"}}};
//   };
#pragma once
#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace kestrel {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E>
struct EnumNames;  // specialised per enum: `what` and `names`

// The name of e (an unlisted value is a programming error: std::logic_error).
template <class E>
std::string name_of(E e) {
  for (const auto& n : EnumNames<E>::names)
    if (n.value == e) return std::string(n.name);
  std::string m = "no name for this ";
  m += EnumNames<E>::what;
  m += " value";
  throw std::logic_error(m);
}

// "a, b or c": the names in their table's order.
template <class E>
std::string enum_choices() {
  std::string s;
  const auto& n = EnumNames<E>::names;
  for (std::size_t k = 0; k < n.size(); ++k) {
    if (k > 0) s += k + 1 == n.size() ? " or " : ", ";
    s += n[k].name;
  }
  return s;
}

// The value named `text`, if any.
template <class E>
std::optional<E> find_enum(std::string_view text) {
  for (const auto& n : EnumNames<E>::names)
    if (n.name == text) return n.value;
  return std::nullopt;
}

// The value named `text`; else InvalidArgument "unknown WHAT 'text' (expected a, b or c)".
template <class E>
E parse_enum(std::string_view text) {
  if (const std::optional<E> e = find_enum<E>(text)) return *e;
  std::string m = "unknown ";
  m += EnumNames<E>::what;
  m += " '";
  m += text;
  m += "' (expected ";
  m += enum_choices<E>();
  m += ")";
  throw InvalidArgument(m);
}

}  // namespace kestrel
