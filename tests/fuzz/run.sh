#!/usr/bin/env bash
# Short fuzz run of every parser (libFuzzer, AddressSanitizer + UndefinedBehaviorSanitizer), started
# from the seed corpus in tests/fuzz/corpus. Usage: run.sh FUZZ_BIN_DIR SECONDS_PER_TARGET.
# A longer run: run.sh build/fuzz 3600 (new inputs land in a temporary corpus copy).
set -euo pipefail
bin=$1
secs=$2
here=$(cd "$(dirname "$0")" && pwd)
for t in idx cifar uci; do
  work=$(mktemp -d)
  cp "$here/corpus/$t"/* "$work/"
  echo "fuzzing $t for ${secs}s"
  "$bin/fuzz_$t" -max_total_time="$secs" -seed=1 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$bin/crash-$t-" "$work" 2>&1 | tail -n 12
  rc=${PIPESTATUS[0]}
  rm -rf "$work"
  [ "$rc" -eq 0 ] || { echo "fuzzer $t failed (rc=$rc), artifacts in $bin"; exit 1; }
done
echo "all parsers survived"
