#!/usr/bin/env bash
# The README's test command (.ci/run calls it): installs what is missing, builds once and runs every test in at least
# one tier. The tiers are ctest labels (tests/tiers.cmake, docs/testing.md):
#   Release build (build/): every test except the `python` label, whose tests run once, against the installed package;
#   sanitize build (build-asan/, ASan + UBSan): the `sanitize` label, building only what those tests need.
# The sanitize build compiles in the background, at a lower priority (nice 10), while the Release and Python tests run:
# they leave part of the two cores idle (ctest's last long tests, the Python tests' one long file), which it takes.
# Every stage's time goes to build/ci/stages.tsv (with its start, so overlapping stages are not counted twice) and every
# test's to build/ci/*.xml; scripts/ci_report.py prints them.
# Usage: scripts/test.sh            the whole suite (CI)
#        scripts/test.sh --quick    a developer's loop: the `unit` and `cli` labels, not `slow`, on the Release build
#                                   (brought up to date first; no setup, no data install, no sanitizers)
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in
  all | --quick) ;;
  *) echo "scripts/test.sh: unknown argument '$mode' (expected nothing or --quick)" >&2; exit 2 ;;
esac
jobs=$(nproc)
ci=$PWD/build/ci
mkdir -p "$ci"
: > "$ci/stages.tsv"
rm -f "$ci"/*.xml "$ci"/.times*
failed=()
t_start=$(date +%s)
cpu_now() {  # sets cpu: the CPU seconds (user + system) of every finished child process of this script so far
  # The builtin in this very shell (in a pipe or $(...) it would count a subshell's children), into a file of this
  # shell's own: the background stage's subshell writes its own at the same time. The name is taken here: inside
  # $(...), $BASHPID would be that subshell's.
  local file="$ci/.times.$BASHPID"
  times > "$file"
  cpu=$(tail -n 1 "$file" | sed 's/[ms]/ /g' | awk '{printf "%d", 60 * ($1 + $3) + $2 + $4}')
}
stage() {  # stage NAME COMMAND...: runs it, records its wall and CPU seconds and exit code, goes on after a failure
  local name=$1 t0 c0 rc=0
  shift
  t0=$(date +%s)
  cpu_now
  c0=$cpu
  echo "[test] $name" >&2
  "$@" || rc=$?
  cpu_now
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" $(($(date +%s) - t0)) "$rc" $((cpu - c0)) $((t0 - t_start)) >> "$ci/stages.tsv"
  ((rc == 0)) || failed+=("$name")
  return "$rc"
}
release_tests() { ctest --test-dir build --output-on-failure -j"$jobs" --output-junit "$ci/ctest-release.xml" "$@"; }

if [ "$mode" = --quick ]; then
  if stage "build release" bash scripts/build.sh; then
    stage "ctest release (unit, cli; not slow)" release_tests -L '^(unit|cli)$' -LE '^slow$'
  fi
else
  stage setup bash scripts/setup.sh && stage data bash scripts/install-data.sh
  release=0
  stage "build release" bash scripts/build.sh || release=$?
  # A subshell: its stage line is written there, its exit code read back by wait.
  (stage "build sanitize (background, nice 10)" nice -n 10 bash scripts/test-sanitize.sh --build-only) &
  sanitize_build=$!
  if ((release == 0)); then
    stage "ctest release (all but python)" release_tests -LE '^python$'
    stage "python tests (installed package)" bash scripts/test-python-package.sh "$ci/python-installed.xml"
  fi
  if wait "$sanitize_build"; then
    stage "ctest sanitize (label sanitize)" bash scripts/test-sanitize.sh --test-only "$ci/ctest-sanitize.xml"
  else
    failed+=("build sanitize")
  fi
fi
# The stage table, the slowest tests, and last the counts over every run as one "N passed, N failed" line.
/usr/bin/python3 scripts/ci_report.py "$ci" --slowest 10 || true
if ((${#failed[@]})); then
  echo "scripts/test.sh: failed stages: ${failed[*]} (the tests' output is above)" >&2
  exit 1
fi
