#!/usr/bin/env bash
# Issue #19: wall time of every `kestrel reproduce NAME` at paper settings, one after another, with the 1-minute load
# average read just before each (the machine's other work makes timings noisy: quote them with their load).
# usage: bash bench/reproductions.sh [--kestrel BIN] [--out DIR] [--quick] [--profile "name1 name2"] [NAME...]
#   --kestrel BIN  the CLI to time (default: $KESTREL_BENCH_BUILD/bin/kestrel, build/bin/kestrel)
#   --out DIR      where outputs, logs and the table go (default: bench/results/tmp/reproductions)
#   --quick        time the --quick runs instead (smoke test of this script)
#   --profile LIST run these names under `perf record -F 49 -g` (49 samples/s: well under 1% overhead) and keep
#                  `perf report --no-children` tops in DIR/NAME.perf.txt
# Writes DIR/times.tsv (name, seconds, load before, exit code) and DIR/times.md (a markdown table); bench/run.sh --e2e
# calls it. Needs KESTREL_DATA_DIR (or the repository's datasets/) for the data sets.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KESTREL=${KESTREL_BENCH_BUILD:-$ROOT/build}/bin/kestrel
OUT=$ROOT/bench/results/tmp/reproductions
QUICK=() PROFILE="" NAMES=()
while [ $# -gt 0 ]; do
  case $1 in
    --kestrel) KESTREL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --quick) QUICK=(--quick) ;;
    --profile) PROFILE=$2; shift ;;
    -*) echo "usage: bash bench/reproductions.sh [--kestrel BIN] [--out DIR] [--quick] [--profile LIST] [NAME...]" >&2
        exit 2 ;;
    *) NAMES+=("$1") ;;
  esac
  shift
done
if [ ${#NAMES[@]} -eq 0 ]; then  # every registered reproduction, in the CLI's order
  mapfile -t NAMES < <("$KESTREL" reproduce --help | grep -m1 'Reproduction:' | sed 's/.*Reproduction: //; s/, or all.*//' |
                       tr ',' '\n' | tr -d ' ')
fi
. "$ROOT/scripts/blas-core.sh" "$KESTREL"  # as scripts/main.sh does
mkdir -p "$OUT"
TSV=$OUT/times.tsv
printf 'name\tseconds\tload1_before\texit\n' > "$TSV"
echo "[reproductions] $KESTREL, $(nproc) cores, OpenBLAS core ${OPENBLAS_CORETYPE:-as detected}," \
     "${QUICK[*]:-paper settings}: ${NAMES[*]}"
total=0
for n in "${NAMES[@]}"; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  cmd=("$KESTREL" reproduce "$n" "${QUICK[@]}" --out "$OUT/out" --force)
  if [[ " $PROFILE " == *" $n "* ]]; then
    cmd=(perf record -F 49 -g -q -o "$OUT/$n.perf.data" -- "${cmd[@]}")
  fi
  t0=$(date +%s.%N)
  rc=0
  "${cmd[@]}" > "$OUT/$n.log" 2>&1 || rc=$?
  t=$(echo "$(date +%s.%N) - $t0" | bc)
  total=$(echo "$total + $t" | bc)
  printf '%s\t%.1f\t%s\t%s\n' "$n" "$t" "$load" "$rc" >> "$TSV"
  printf '[reproductions] %-11s %7.1f s (load %s before, exit %s)\n' "$n" "$t" "$load" "$rc"
  if [ -f "$OUT/$n.perf.data" ]; then
    perf report -i "$OUT/$n.perf.data" --no-children --stdio --percent-limit 1.5 -g none 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -25 > "$OUT/$n.perf.txt" || true
  fi
done
{
  echo "| reproduction | wall time (s) | load (1 min) before |"
  echo "|---|---:|---:|"
  tail -n +2 "$TSV" | awk -F'\t' '{ printf "| %s | %s%s | %s |\n", $1, $2, ($4 == 0 ? "" : " (exit " $4 ")"), $3 }'
  printf '| **total** | **%.0f** (%.1f min) | |\n' "$total" "$(echo "$total / 60" | bc -l)"
} > "$OUT/times.md"
cat "$OUT/times.md"
