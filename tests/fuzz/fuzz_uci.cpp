// libFuzzer target: the UCI text parser (comma and whitespace schemas, both encodings) must either
// return finite, consistently shaped data or throw IoError.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"
#include "data/uci.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  using C = kestrel::UciColumn;
  static const kestrel::UciSpec comma{"fuzz", "fuzz", ',', {C::Numeric, C::Categorical, C::Class}};
  static const kestrel::UciSpec space{"fuzz", "fuzz", ' ', {C::Ignore, C::Numeric, C::Target}};
  const auto& spec = (data[0] & 1) ? comma : space;
  const auto enc = (data[0] & 2) ? kestrel::Encoding::OneHot : kestrel::Encoding::Ordinal;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const kestrel::UciData d = kestrel::parse_uci(text, spec, enc, "fuzz");
    if (!d.X.is_finite() || d.X.n_rows != d.feature_names.size()) std::abort();
    if (!d.classes.empty() && (d.labels.n_elem != d.X.n_cols || d.labels.max() >= d.classes.size())) std::abort();
  } catch (const kestrel::IoError&) {
  }
  return 0;
}
