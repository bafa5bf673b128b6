// kestrel._blas_core: loaded by kestrel/__init__.py before the compiled module kestrel._kestrel (which loads OpenBLAS),
// to set OPENBLAS_CORETYPE from the CPU's flags while that still counts (lib/core/blas_core.hpp). Links no BLAS.
#include <pybind11/pybind11.h>

#include "core/blas_core.hpp"

PYBIND11_MODULE(_blas_core, m) {
  m.doc() = "Sets OPENBLAS_CORETYPE before kestrel loads OpenBLAS (kestrel's own use; see kestrel._kestrel)";
  m.def("set_openblas_core", &kestrel::set_openblas_core,
        "Sets OPENBLAS_CORETYPE to this CPU's core when it is unset; returns what it set, or ''");
  m.def("openblas_core_for_flags", &kestrel::openblas_core_for_flags, pybind11::arg("flags"),
        "The OpenBLAS core kestrel chooses for these CPU flags (as /proc/cpuinfo lists them), or ''");
}
