// Strict parsing of user-given text (see parse.hpp).
#include "core/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace kestrel {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::uint64_t parse_uint(const std::string& where, const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  const std::string range =
      hi == UINT64_MAX ? fmt::format("an integer >= {}", lo) : fmt::format("an integer in [{}, {}]", lo, hi);
  std::string t = trim(text);
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  const bool digits = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) throw InvalidArgument(fmt::format("{}: expected {}, got '{}'", where, range, text));
  std::uint64_t v = 0;
  for (char c : t) {
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10)
      throw InvalidArgument(fmt::format("{}: '{}' is too large (expected {})", where, text, range));
    v = v * 10 + digit;
  }
  if (v < lo || v > hi) throw InvalidArgument(fmt::format("{}: expected {}, got '{}'", where, range, text));
  return v;
}

double parse_real(const std::string& where, const std::string& text) {
  const std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  const double v = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size())
    throw InvalidArgument(fmt::format("{}: expected a number, got '{}'", where, text));
  if (!std::isfinite(v) || (errno == ERANGE && std::abs(v) > 1))
    throw InvalidArgument(fmt::format("{}: expected a finite number, got '{}'", where, text));
  return v;
}

bool parse_bool(const std::string& where, const std::string& text) {
  std::string t = trim(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  throw InvalidArgument(fmt::format("{}: expected true or false, got '{}'", where, text));
}

std::vector<std::string> split_list(const std::string& where, const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) throw InvalidArgument(fmt::format("{}: empty item in the list '{}'", where, text));
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void require_distinct(const std::string& where, const std::vector<std::string>& items) {
  for (std::size_t i = 0; i < items.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (items[i] == items[j]) throw InvalidArgument(fmt::format("{}: '{}' is listed twice", where, items[i]));
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best = c, best_d = d;
  }
  // '_' for '-' (halve_real) counts as one edit per character; allow up to half the word.
  return best_d <= std::max<std::size_t>(2, word.size() / 2) ? best : "";
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix) {
  const std::string n = nearest(word, candidates);
  return n.empty() ? "" : fmt::format("; did you mean '{}{}'?", prefix, n);
}

}  // namespace kestrel
