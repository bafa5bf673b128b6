# Sourced by scripts/main.sh and bench/: picks OpenBLAS's kernels when its CPU detection fails (issue #19).
# On virtual machines that hide the CPU model, OpenBLAS 0.3.21 falls back to its generic Prescott (SSE3) kernels:
# here DGEMM ran at 16 GFLOP/s instead of 72 with the Cooperlake kernels (single thread, n = 2048), and matrix
# products are 20-30% of the classification reproductions. If OPENBLAS_CORETYPE is unset and OpenBLAS reports
# Prescott on a CPU with AVX2/AVX-512, this exports the core the CPU's flags support. Results change at rounding level
# only (another summation order inside DGEMM), as between two machines. Usage: . scripts/blas-core.sh KESTREL_BIN
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "${1:-}" ]; then
  _core=$(OPENBLAS_VERBOSE=2 "$1" --version 2>&1 | sed -n 's/^Core: //p' | head -1 || true)
  _flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true) "
  if [ "$_core" = Prescott ]; then
    if [[ $_flags == *" avx512_bf16 "* && $_flags == *" avx512vl "* ]]; then export OPENBLAS_CORETYPE=Cooperlake
    elif [[ $_flags == *" avx512f "* && $_flags == *" avx512bw "* && $_flags == *" avx512vl "* ]]; then
      export OPENBLAS_CORETYPE=SkylakeX
    elif [[ $_flags == *" avx2 "* && $_flags == *" fma "* ]]; then export OPENBLAS_CORETYPE=Haswell
    fi
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
      echo "[blas] OpenBLAS detected no CPU model (generic Prescott kernels); using OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
    fi
  fi
  unset _core _flags
fi
