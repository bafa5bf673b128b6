// Memory estimates checked before a computation starts, so that an impossible size (`--points 1000000000`)
// is refused at once naming the bytes needed instead of ending in std::bad_alloc after a long wait.
#pragma once
#include <cstdint>
#include <string>

namespace kestrel {

// Physical memory of this machine (sysconf), or $KESTREL_MEMORY_LIMIT bytes when set (tests, batch jobs).
double memory_limit_bytes();
// "1.5 GB"
std::string format_bytes(double bytes);
// Throws InvalidArgument "<what> needs about 2.0 TB of memory (2048000000000 bytes), more than the
// 15.5 GB of this machine" when bytes exceeds memory_limit_bytes() ("more than the limit of 1.0 kB set by
// KESTREL_MEMORY_LIMIT=1000" when the limit came from there).
void require_memory(double bytes, const std::string& what);

}  // namespace kestrel
