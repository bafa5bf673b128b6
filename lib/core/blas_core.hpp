// OpenBLAS's kernels on CPUs it cannot identify (issues 19, 49). OpenBLAS picks its kernels (its "core") once, when it
// is loaded, from the CPU model; on virtual machines that hide the model it falls back to its generic Prescott (SSE3)
// kernels (DGEMM at 16 GFLOP/s instead of 72 with Cooperlake's, one thread, n = 2048). OPENBLAS_CORETYPE, set before
// OpenBLAS is loaded, chooses the core: kestrel chooses it here from the CPU's flags; a value the user set is kept.
#pragma once
#include <string>

namespace kestrel {

// The best core of those kestrel knows that CPU flags (space-separated, as /proc/cpuinfo lists them) support:
// Cooperlake (AVX-512 BF16 and VL), SkylakeX (AVX-512 F, BW and VL), Haswell (AVX2 and FMA); "" for none of them.
std::string openblas_core_for_flags(const std::string& flags);

// The same for this machine (the first "flags" line of /proc/cpuinfo); "" when it cannot be read.
std::string openblas_core_for_this_cpu();

// The core OpenBLAS runs in this process ("" when the BLAS is not OpenBLAS).
std::string openblas_core();

// The OPENBLAS_CORETYPE a fresh start of this process should get: this CPU's core when OPENBLAS_CORETYPE is unset and
// OpenBLAS runs its generic Prescott kernels; "" otherwise (set by the user, OpenBLAS found the CPU, or nothing
// better). The command line starts itself again with it (apps/kestrel/main.cpp).
std::string openblas_core_to_set();
// The same from what it depends on: OPENBLAS_CORETYPE (null when unset), the core OpenBLAS runs and this CPU's core.
std::string openblas_core_to_set(const char* asked, const std::string& running, const std::string& cpu_core);

// For a process that cannot start again (Python): sets OPENBLAS_CORETYPE to this CPU's core when it is unset, for an
// OpenBLAS loaded after this call (its own detection is not known before it is loaded). Returns what it set, or "".
std::string set_openblas_core();

// "" unless OpenBLAS runs its generic Prescott kernels on a CPU that supports a better core and the user did not ask
// for Prescott: then why (it was loaded before OPENBLAS_CORETYPE was set) and what to do, in one sentence.
std::string openblas_core_warning();
std::string openblas_core_warning(const char* asked, const std::string& running, const std::string& cpu_core);

}  // namespace kestrel
