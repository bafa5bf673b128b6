#!/usr/bin/env bash
# Builds the `sanitize` preset (ASan + UBSan at -O1 with line tables, Armadillo's bounds checks on, into build-asan/) and
# runs the whole test suite on it: a sanitizer report fails its test. Open MPI's own allocations are the only
# suppressed leaks (tests/mpi/lsan-openmpi.supp, mpi_sweep). Usage: scripts/test-sanitize.sh [jobs, default nproc]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-$(nproc)}
start=$(date +%s)
cmake --preset sanitize >/dev/null
cmake --build build-asan -j"$jobs"
built=$(date +%s)
# halt_on_error: a UBSan finding fails the process (and so the test) instead of scrolling past in the log.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
ctest --test-dir build-asan --output-on-failure -j"$jobs" || status=$?
end=$(date +%s)
echo "sanitize preset: build $((built - start)) s, tests $((end - built)) s, total $((end - start)) s (-j$jobs)"
exit "$status"
