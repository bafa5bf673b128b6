#!/usr/bin/env bash
# Issues #18, #34: `kestrel advise` at L = 4096, d = 64, dv = 64 with every applicable estimator and the iid,
# orthogonal and simplex samplers (issue 34's "under 60 s on this machine"), side by side with its NumPy peer in the
# same run: the way one answers the question without kestrel, simulating random-
# feature attention (PosRF, M = 256, 20 draws, stabilised) to measure one estimator's error at one M. Inputs are
# seeded (bench/advise_inputs.py). Each command runs RUNS times in turn (A B A B ...); medians and the median of the
# pairwise ratios go to OUT/advise.md. --full adds `kestrel advise --full-curve` (every curve simulated to the budget,
# the worst case) to each round as a third command.
# usage: bash bench/advise.sh [--kestrel BIN] [--out DIR] [--runs N] [--L L] [--full]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KESTREL=${KESTREL_BENCH_BUILD:-$ROOT/build}/bin/kestrel
OUT=$ROOT/bench/results/tmp/advise
RUNS=3 L=4096 FULL=0
while [ $# -gt 0 ]; do
  case $1 in
    --kestrel) KESTREL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --L) L=$2; shift ;;
    --full) FULL=1 ;;
    *) echo "usage: bash bench/advise.sh [--kestrel BIN] [--out DIR] [--runs N] [--L L] [--full]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
/usr/bin/python3 "$ROOT/bench/advise_inputs.py" "$OUT" "$L"
A=("$KESTREL" advise --queries "$OUT/q.npy" --keys "$OUT/k.npy" --values "$OUT/v.npy" --samplers iid,orthogonal,simplex
   --quiet --json)
B=(/usr/bin/python3 "$ROOT/bench/advise_inputs.py" --peer "$OUT")
C=("${A[@]}" --full-curve)
: > "$OUT/times.tsv"
commands="A B"
[ "$FULL" = 1 ] && commands="A B C"
for r in $(seq "$RUNS"); do
  for which in $commands; do
    t0=$(date +%s.%N)
    case $which in
      A) "${A[@]}" > "$OUT/advise.json" ;;
      B) "${B[@]}" > "$OUT/peer.txt" ;;
      C) "${C[@]}" > "$OUT/advise_full.json" ;;
    esac
    printf '%s\t%s\t%s\n' "$r" "$which" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$OUT/times.tsv"
  done
done
/usr/bin/python3 - "$OUT" "$L" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, statistics, sys
out, L, load = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [line.split("\t") for line in open(f"{out}/times.tsv").read().split("\n") if line]
a = {r: float(t) for r, w, t in rows if w == "A"}
b = {r: float(t) for r, w, t in rows if w == "B"}
c = {r: float(t) for r, w, t in rows if w == "C"}
ratios = [a[r] / b[r] for r in a]
rep = json.load(open(f"{out}/advise.json"))["advice"]
ok = [x for x in rep["rows"] if x["status"] == "ok"]
ends = [x["curve_end_m"] for x in ok if x.get("curve_end_m")]
row = lambda label, t: f"| {label} | {statistics.median(t.values()):.1f} | {min(t.values()):.1f} | {max(t.values()):.1f} |\n"
text = f"| command (L = {L}, d = 64, dv = 64) | median wall (s) | min | max |\n|---|---:|---:|---:|\n"
text += row(f"`kestrel advise` ({len(ok)} estimator x sampler rows simulated on {rep['sampled_rows']} rows x {L} keys, "
            f"curves ending at M = {min(ends):.0f}..{max(ends):.0f}; fit, range, timing)", a)
text += row("NumPy peer: PosRF at M = 256 only, 20 draws simulated", b)
if c:
    text += row(f"`kestrel advise --full-curve` (every curve simulated to M = {rep['options']['budget']})", c)
text += f"\nMedian of the pairwise ratios advise / peer: {statistics.median(ratios):.2f} ({len(ratios)} pairs"
if c:
    text += f"; --full-curve / peer: {statistics.median([c[r] / b[r] for r in c]):.2f}"
text += f"; load {load} after).\nRecommendation printed: {rep['recommendation']}\n"
open(f"{out}/advise.md", "w").write(text)
print(text)
PY
