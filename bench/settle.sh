#!/usr/bin/env bash
# advise's stop rule before and after --time-budget (issue 66 item 5; bench/settle.cpp) on the inputs of
# `kestrel reproduce advise` against a built tree, with OPENBLAS_CORETYPE set as kestrel runs; prints a Markdown table.
# usage: bash bench/settle.sh [BUILD_DIR] [--quick]   (default build/, the paper-size inputs)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
shift || true
OUT=$(bash "$ROOT/bench/compile_driver.sh" "$BUILD" settle)
. "$ROOT/scripts/blas-core.sh" "$BUILD/bin/kestrel"
echo "[bench] $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" >&2
"$OUT" "$@"
