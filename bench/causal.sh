#!/usr/bin/env bash
# Issue "Attention as models run it", item 4: causal `kestrel advise` against the bidirectional run on the same
# inputs: Q, K, V of L tokens (d = dv = 128, entries N(0, 0.25), seeded as bench/long_context.sh draws them), every
# applicable estimator, --samplers iid,orthogonal, --rows 512; A (bidirectional) then B (--causal) in turn, RUNS
# times, wall time and peak RSS from /usr/bin/time. Medians and the medians of the pairwise ratios B/A go to
# OUT/causal.md (the issue asks for B/A <= 1.5 in time and in memory).
# usage: bash bench/causal.sh [--kestrel BIN] [--out DIR] [--runs N] [--L L]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KESTREL=${KESTREL_BENCH_BUILD:-$ROOT/build}/bin/kestrel
OUT=$ROOT/bench/results/tmp/causal
RUNS=1 L=32768
while [ $# -gt 0 ]; do
  case $1 in
    --kestrel) KESTREL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --L) L=$2; shift ;;
    *) echo "usage: bash bench/causal.sh [--kestrel BIN] [--out DIR] [--runs N] [--L L]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
. "$ROOT/scripts/blas-core.sh" "$KESTREL"
/usr/bin/python3 - "$OUT" "$L" <<'PY'
import sys
import numpy as np
out, L = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(35)
for name in ("q", "k", "v"):
    np.save(f"{out}/{name}.npy", 0.5 * rng.standard_normal((L, 128)))
PY
printf 'run\tcommand\tseconds\tpeak_rss_kb\n' > "$OUT/causal.tsv"
for r in $(seq "$RUNS"); do
  for mode in bidirectional causal; do
    extra=()
    [ "$mode" = causal ] && extra=(--causal)
    /usr/bin/time -f '%e %M' -o "$OUT/time.txt" "$KESTREL" advise --queries "$OUT/q.npy" --keys "$OUT/k.npy" \
      --values "$OUT/v.npy" --rows 512 --samplers iid,orthogonal --quiet --json "${extra[@]}" > "$OUT/$mode$r.json"
    printf '%s\t%s\t%s\t%s\n' "$r" "$mode" $(cat "$OUT/time.txt") >> "$OUT/causal.tsv"
  done
done
/usr/bin/python3 - "$OUT" "$L" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import csv, json, statistics, sys
out, L, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = list(csv.DictReader(open(f"{out}/causal.tsv"), delimiter="\t"))
by = lambda c, k: [float(r[k]) for r in rows if r["command"] == c]
ratio = lambda k: statistics.median(c / b for b, c in zip(by("bidirectional", k), by("causal", k)))
lines = [f"# causal against bidirectional `kestrel advise` (L = {L}, d = dv = 128, 512 rows, iid + orthogonal)", "",
         "| command | median s | peak RSS (GB) |", "|---|---:|---:|"]
for c in ("bidirectional", "causal"):
    lines.append(f"| `kestrel advise`{' --causal' if c == 'causal' else ''} | {statistics.median(by(c, 'seconds')):.1f} "
                 f"| {statistics.median(by(c, 'peak_rss_kb')) / 1e6:.2f} |")
lines += ["", f"Median pairwise ratios causal / bidirectional ({len(by('causal', 'seconds'))} rounds): time "
          f"{ratio('seconds'):.2f}, peak RSS {ratio('peak_rss_kb'):.2f}; load {load} after."]
# The work each run did: feature columns x draws over every simulated curve (settle draws included), and the time per
# unit of it, so that the ratio splits into more work (causal rows nearer the target keep their draws longer) and cost
# per unit of work.
def work(c):
    total = 0
    for r in json.load(open(f"{out}/{c}1.json"))["advice"]["rows"]:
        cur = r.get("curve") or {}
        prev = 0
        for m, n in zip(cur.get("m", []), cur.get("draws", [])):
            total, prev = total + (m - prev) * n, m
    return total
w = {c: work(c) for c in ("bidirectional", "causal")}
t = {c: statistics.median(by(c, "seconds")) for c in ("bidirectional", "causal")}
lines.append(f"Work (feature columns x draws, round 1): bidirectional {w['bidirectional']:.0f}, causal "
             f"{w['causal']:.0f} (ratio {w['causal'] / w['bidirectional']:.2f}); time per unit of work causal / "
             f"bidirectional {(t['causal'] / w['causal']) / (t['bidirectional'] / w['bidirectional']):.2f}.")
for c in ("bidirectional", "causal"):
    a = json.load(open(f"{out}/{c}1.json"))["advice"]
    dec = {}
    for r in a["rows"]:
        if r.get("status") == "ok":
            dec[r["decision"]] = dec.get(r["decision"], 0) + 1
    lines.append(f"{c}: decisions {dec}; recommendation: {a.get('recommendation', '')}")
open(f"{out}/causal.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
