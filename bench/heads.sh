#!/usr/bin/env bash
# Issue "Attention as models run it", item 4: `kestrel advise` on H heads ([H, L, d] stacks; 12 heads at L = 4096,
# d = dv = 64 by default) against the same work done head by head (each head's 2-D advise with the seed the stacked
# run derived for it, one after another: the same numbers), and the NumPy peer of bench/advise.sh (PosRF at one M on
# head 0), in one run: A (heads) B (head by head) C (peer) in turn, RUNS times. Inputs are seeded, each head drawn as
# bench/advise_inputs.py draws its one head (q, k: N(0, 0.25); v: N(1, 1)). Medians, each head's own time, and the
# medians of the pairwise ratios A/B (what running heads together costs against one by one) and A/C go to
# OUT/heads.md.
# usage: bash bench/heads.sh [--kestrel BIN] [--out DIR] [--runs N] [--heads H] [--L L]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KESTREL=${KESTREL_BENCH_BUILD:-$ROOT/build}/bin/kestrel
OUT=$ROOT/bench/results/tmp/heads
RUNS=3 H=12 L=4096
while [ $# -gt 0 ]; do
  case $1 in
    --kestrel) KESTREL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --heads) H=$2; shift ;;
    --L) L=$2; shift ;;
    *) echo "usage: bash bench/heads.sh [--kestrel BIN] [--out DIR] [--runs N] [--heads H] [--L L]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
/usr/bin/python3 - "$OUT" "$H" "$L" <<'PY'
import sys
import numpy as np
out, H, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(2026)
q, k, v = 0.5 * rng.standard_normal((H, L, 64)), 0.5 * rng.standard_normal((H, L, 64)), rng.normal(1, 1, (H, L, 64))
for name, a in (("q", q), ("k", k), ("v", v)):
    np.save(f"{out}/{name}_heads.npy", a)
    np.save(f"{out}/{name}.npy", a[0])  # head 0: the peer's input
    for h in range(H):
        np.save(f"{out}/{name}{h}.npy", a[h])
PY
common=(--samplers iid,orthogonal,simplex --quiet --json)
A=("$KESTREL" advise --queries "$OUT/q_heads.npy" --keys "$OUT/k_heads.npy" --values "$OUT/v_heads.npy" "${common[@]}")
one_by_one() {  # each head alone with the seed the stacked run derived for it (heads.json), timed per head
  local h seed t0
  for h in $(seq 0 $((H - 1))); do
    seed=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['advice']['heads'][$h]['seed'])" \
           "$OUT/heads.json")
    t0=$(date +%s.%N)
    "$KESTREL" advise --queries "$OUT/q$h.npy" --keys "$OUT/k$h.npy" --values "$OUT/v$h.npy" "${common[@]}" \
      --seed "$seed" > "$OUT/one$h.json"
    printf '%s\t%s\t%s\n' "$r" "h$h" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$OUT/times.tsv"
  done
}
C=(/usr/bin/python3 "$ROOT/bench/advise_inputs.py" --peer "$OUT")
: > "$OUT/times.tsv"
for r in $(seq "$RUNS"); do
  for which in A B C; do
    t0=$(date +%s.%N)
    case $which in
      A) "${A[@]}" > "$OUT/heads.json" ;;
      B) one_by_one ;;
      C) "${C[@]}" > "$OUT/peer.txt" ;;
    esac
    printf '%s\t%s\t%s\n' "$r" "$which" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$OUT/times.tsv"
  done
done
/usr/bin/python3 - "$OUT" "$H" "$L" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, statistics, sys
out, H, L, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [line.split("\t") for line in open(f"{out}/times.tsv").read().split("\n") if line]
t = {w: {r: float(s) for r, ww, s in rows if ww == w} for w in "ABC"}
med = {w: statistics.median(t[w].values()) for w in "ABC"}
heads = json.load(open(f"{out}/heads.json"))["advice"]
text = (f"# advise on {H} heads (L = {L}, d = dv = 64, iid + orthogonal + simplex, every applicable estimator)\n\n"
        f"| command | median s | min | max |\n|---|---:|---:|---:|\n")
for w, what in (("A", f"`kestrel advise` on the [{H}, {L}, 64] stacks"),
                ("B", f"`kestrel advise` on each head alone, {H} runs one after another"),
                ("C", "NumPy peer: PosRF at M = 256 on head 0, 20 draws")):
    text += f"| {what} | {med[w]:.1f} | {min(t[w].values()):.1f} | {max(t[w].values()):.1f} |\n"
text += "\nEach head alone (median s): " + ", ".join(
    f"{h}: {statistics.median(float(s) for r, w, s in rows if w == f'h{h}'):.1f}" for h in range(H)) + "\n"
ab = statistics.median(t["A"][r] / t["B"][r] for r in t["A"])
ac = statistics.median(t["A"][r] / t["C"][r] for r in t["A"])
text += (f"\nMedian pairwise ratios ({len(t['A'])} rounds): {H} heads together / one by one {ab:.2f}, "
         f"heads / peer {ac:.1f}; load {load} after.\nRecommendation printed: {heads['recommendation']}\n")
open(f"{out}/heads.md", "w").write(text)
print(text)
PY
