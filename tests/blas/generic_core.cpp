// For Cli.TakesTheFastOpenBlasKernelsAndKeepsAUserChoice (tests/cli_test.cpp, issue 49): a stand-in for OpenBLAS's
// openblas_get_corename, preloaded (LD_PRELOAD) into `kestrel`. It reports the generic Prescott kernels while
// OPENBLAS_CORETYPE is unset, as OpenBLAS does on a CPU it cannot identify, and OpenBLAS's own answer once it is set:
// the core `kestrel --version` lists then shows whether the program started itself again with OPENBLAS_CORETYPE.
#include <cstdlib>

#include <dlfcn.h>

extern "C" char* openblas_get_corename() {
  static char generic[] = "Prescott";
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) return generic;
  using Fn = char* (*)();
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "openblas_get_corename"));
  static char none[] = "";
  return real ? real() : none;
}
