#!/usr/bin/env bash
# The sanitize tier: builds the `sanitize` preset (clang 14, ASan + UBSan at -O1 with line tables, Armadillo's bounds
# checks on, into build-asan/; clang compiles it about 40% faster than g++ at the same settings), only the targets its
# tests need (the test binary and the command line it runs), and runs the tests labelled `sanitize` (tests/tiers.cmake):
# a sanitizer report fails its test. Open MPI's own allocations are the only suppressed leaks
# (tests/mpi/lsan-openmpi.supp), for whoever runs the mpi label here.
# Usage: scripts/test-sanitize.sh [--build-only | --test-only [JUNIT.xml]]   (default: build, then test)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-both}
junit=${2:-}
case "$mode" in
  both | --build-only | --test-only) ;;
  *) echo "scripts/test-sanitize.sh: unknown argument '$mode' (expected --build-only, --test-only [JUNIT.xml] or nothing)" >&2
     exit 2 ;;
esac
jobs=$(nproc)
if [ "$mode" = both ] || [ "$mode" = --build-only ]; then
  # A build-asan/ configured by an older checkout with g++ cannot switch compilers in place: it is made anew.
  if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' build-asan/CMakeCache.txt; then
    echo "[sanitize] build-asan/ was configured with another compiler: removing it for the clang build" >&2
    rm -rf build-asan
  fi
  cmake --preset sanitize >/dev/null
  cmake --build build-asan -j"$jobs" --target kestrel_tests kestrel_cli
fi
if [ "$mode" = both ] || [ "$mode" = --test-only ]; then
  # halt_on_error: a UBSan finding fails the process (and so the test) instead of scrolling past in the log.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L '^sanitize$' ${junit:+--output-junit "$junit"}
fi
