// OpenBLAS's core chosen from the CPU's flags (see blas_core.hpp).
#include "core/blas_core.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <strings.h>

#include <fmt/format.h>

// Declared weak: present when the BLAS is OpenBLAS, null otherwise.
extern "C" char* openblas_get_corename() __attribute__((weak));

namespace kestrel {

std::string openblas_core_for_flags(const std::string& flags) {
  std::set<std::string> f;
  std::istringstream in(flags);
  for (std::string w; in >> w;) f.insert(w);
  const auto has = [&](const char* w) { return f.count(w) != 0; };
  if (has("avx512_bf16") && has("avx512vl")) return "Cooperlake";
  if (has("avx512f") && has("avx512bw") && has("avx512vl")) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
  return "";
}

std::string openblas_core_for_this_cpu() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos)
      return openblas_core_for_flags(line.substr(line.find(':') + 1));
  return "";
}

std::string openblas_core() { return openblas_get_corename != nullptr ? openblas_get_corename() : ""; }

std::string openblas_core_to_set() {
  return openblas_core_to_set(std::getenv("OPENBLAS_CORETYPE"), openblas_core(), openblas_core_for_this_cpu());
}

std::string openblas_core_to_set(const char* asked, const std::string& running, const std::string& cpu_core) {
  return asked == nullptr && running == "Prescott" ? cpu_core : "";
}

std::string set_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const std::string core = openblas_core_for_this_cpu();
  if (!core.empty()) ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  return core;
}

std::string openblas_core_warning() {
  return openblas_core_warning(std::getenv("OPENBLAS_CORETYPE"), openblas_core(), openblas_core_for_this_cpu());
}

std::string openblas_core_warning(const char* asked, const std::string& running, const std::string& cpu_core) {
  if (running != "Prescott" || cpu_core.empty() || (asked && ::strcasecmp(asked, "Prescott") == 0)) return "";
  return fmt::format(
      "OpenBLAS runs its generic Prescott kernels, though this CPU supports {}'s (several times faster matrix "
      "products): it was loaded before kestrel could set OPENBLAS_CORETYPE (by NumPy, typically); import kestrel "
      "before numpy, or set OPENBLAS_CORETYPE={} before starting Python",
      cpu_core, cpu_core);
}

}  // namespace kestrel
