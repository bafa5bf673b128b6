// Memory estimates (see memory.hpp).
#include "core/memory.hpp"

#include <cstdlib>

#include <unistd.h>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace kestrel {

double memory_limit_bytes() {
  if (const char* env = std::getenv("KESTREL_MEMORY_LIMIT"); env && *env)
    return static_cast<double>(parse_uint("KESTREL_MEMORY_LIMIT", env, 1));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 1e18;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000 && u < 6) bytes /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

void require_memory(double bytes, const std::string& what) {
  const double limit = memory_limit_bytes();
  const char* env = std::getenv("KESTREL_MEMORY_LIMIT");
  if (bytes > limit)
    throw InvalidArgument(fmt::format(
        "{} needs about {} of memory ({:.0f} bytes), more than {}", what, format_bytes(bytes), bytes,
        env && *env ? fmt::format("the limit of {} set by KESTREL_MEMORY_LIMIT={}", format_bytes(limit), env)
                    : fmt::format("the {} of this machine", format_bytes(limit))));
}

}  // namespace kestrel
