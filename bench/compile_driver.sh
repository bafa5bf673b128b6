#!/usr/bin/env bash
# Compiles one bench driver (bench/NAME.cpp) against a built tree with the flags and libraries the build gives the
# `kestrel` command line (read from BUILD/build.ninja, so nothing in CMake changes); prints the binary's path.
# usage: bash bench/compile_driver.sh BUILD_DIR NAME
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
NAME=$2
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
OUT=$BUILD/bin/${NAME}_bench
(cd "$BUILD" && c++ -O3 -DNDEBUG -std=c++20 $DEFINES $INCLUDES -I"$ROOT" "$ROOT/bench/$NAME.cpp" -o "$OUT" $LIBS)
echo "$OUT"
