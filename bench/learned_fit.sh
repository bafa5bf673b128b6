#!/usr/bin/env bash
# Time per head of fitting Hedgehog maps (issue 65 item 5; bench/learned_fit.cpp) against a built tree: compiles the
# driver with the flags and libraries the build gives the `kestrel` command line (read from BUILD/build.ninja, so
# nothing in CMake changes), sets OPENBLAS_CORETYPE as kestrel runs (scripts/blas-core.sh) and prints CSV.
# usage: bash bench/learned_fit.sh [BUILD_DIR] [L ...]   (default build/, L = 512 4096)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
shift || true
NINJA=$BUILD/build.ninja
[ -f "$NINJA" ] && [ -f "$BUILD/libkestrel.a" ] || { echo "build $BUILD first (Ninja, the kestrel target)" >&2; exit 2; }
field() {  # field RULE_PREFIX NAME: a variable of the first build statement starting with RULE_PREFIX
  awk -v r="$1" -v n="  $2 = " 'index($0, "build " r) == 1 { on = 1; next } on && /^build / { exit }
    on && index($0, n) == 1 { print substr($0, length(n) + 1); exit }' "$NINJA"
}
MAIN="apps/CMakeFiles/kestrel_cli.dir/kestrel/main.cpp.o"
DEFINES=$(field "$MAIN" DEFINES)
INCLUDES=$(field "$MAIN" INCLUDES)
LIBS=$(field "bin/kestrel:" LINK_LIBRARIES)
OUT=$BUILD/bin/learned_fit_bench
(cd "$BUILD" && c++ -O3 -DNDEBUG -std=c++20 $DEFINES $INCLUDES "$ROOT/bench/learned_fit.cpp" -o "$OUT" $LIBS)
. "$ROOT/scripts/blas-core.sh" "$BUILD/bin/kestrel"
echo "[bench] $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" >&2
"$OUT" "$@"
