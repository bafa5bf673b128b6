// Whether this test binary is the sanitize build's (ASan + UBSan, scripts/test-sanitize.sh): GCC says so with
// __SANITIZE_ADDRESS__, clang (the sanitize preset's compiler) with __has_feature(address_sanitizer).
#pragma once

namespace kestrel::test {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
inline constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace kestrel::test
