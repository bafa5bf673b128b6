// Strict parsing of user-given text (command line, TOML, Python keywords): whole-string numbers with no
// unsigned wrap-around, overflow or silent clamping, lists without duplicates, and the nearest valid name
// for a misspelling. Errors are InvalidArgument naming where the value came from and the value itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kestrel {

// An integer in [lo, hi] written in decimal digits (an optional leading '+'): "-1", "1e3", "4.0",
// "99999999999999999999" and "" are errors ("--seed: expected an integer in [0, ...], got '-1'").
std::uint64_t parse_uint(const std::string& where, const std::string& text, std::uint64_t lo = 0,
                         std::uint64_t hi = UINT64_MAX);
// A finite number (strtod syntax, the whole string): "nan", "inf", "1e400" and "0.5x" are errors.
double parse_real(const std::string& where, const std::string& text);
// "true"/"false" (also "1"/"0", "yes"/"no", "on"/"off").
bool parse_bool(const std::string& where, const std::string& text);

// Comma-separated items, each trimmed; an empty item ("0.5,,1") is an error.
std::vector<std::string> split_list(const std::string& where, const std::string& text);
// Throws if a name occurs twice ("--estimators: 'oprf' is listed twice").
void require_distinct(const std::string& where, const std::vector<std::string>& items);

// Edit (Levenshtein) distance and the candidate nearest to `word` ("" when none is close: more than
// half of the word would have to change).
std::size_t edit_distance(const std::string& a, const std::string& b);
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
// "; did you mean 'sigma'?" or "" when no candidate is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "");

}  // namespace kestrel
