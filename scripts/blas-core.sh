# Sourced by scripts/main.sh and bench/: exports the OpenBLAS core kestrel runs with, so that other programs (the NumPy
# peers in bench/) use the same kernels. kestrel chooses it itself where OpenBLAS cannot identify the CPU and falls
# back to its generic Prescott kernels (lib/core/blas_core.hpp: from the CPU's flags; issues 19 and 49); here it is
# read back from `kestrel --version`. A value already set is kept. Usage: . scripts/blas-core.sh KESTREL_BIN
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "${1:-}" ]; then
  _core=$("$1" --version 2>/dev/null | sed -n 's/^  openblas_core //p' | head -1 || true)
  if [ -n "$_core" ] && [ "$_core" != Prescott ]; then
    export OPENBLAS_CORETYPE=$_core
    echo "[blas] OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (the core kestrel runs with)" >&2
  fi
  unset _core
fi
