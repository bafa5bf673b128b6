#!/usr/bin/env bash
# Time per head of fitting Hedgehog maps (issue 65 item 5; bench/learned_fit.cpp) against a built tree (compiled by
# bench/compile_driver.sh), with OPENBLAS_CORETYPE set as kestrel runs (scripts/blas-core.sh); prints CSV.
# usage: bash bench/learned_fit.sh [BUILD_DIR] [L ...]   (default build/, L = 512 4096)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
shift || true
OUT=$(bash "$ROOT/bench/compile_driver.sh" "$BUILD" learned_fit)
. "$ROOT/scripts/blas-core.sh" "$BUILD/bin/kestrel"
echo "[bench] $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" >&2
"$OUT" "$@"
