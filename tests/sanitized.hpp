// Whether this test binary is the sanitize build's (ASan + UBSan, scripts/test-sanitize.sh): GCC says so with
// __SANITIZE_ADDRESS__, clang (the sanitize preset's compiler) with __has_feature(address_sanitizer). And the one rule
// for oversized Monte Carlo tests there: a quarter of the draws (sanitized_draws), at the same kSigmas threshold. The
// false-failure rate each test states is unchanged (its z-scores are in units of its own SE); its power drops, the
// SE doubling, so the smallest error it detects doubles; the Release build runs the full draws with the full power.
// The sanitizers are there for memory and undefined-behaviour errors, which a quarter of the draws reach the same way.
#pragma once
#include <cstddef>

namespace kestrel::test {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
inline constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
inline constexpr bool kSanitized = false;
#endif
// `draws` in Release, a quarter (at least 1000) under the sanitizers.
constexpr std::size_t sanitized_draws(std::size_t draws) {
  return kSanitized ? (draws / 4 > 1000 ? draws / 4 : (draws < 1000 ? draws : 1000)) : draws;
}
}  // namespace kestrel::test
