#!/usr/bin/env bash
# Issue 35: `kestrel advise` at long context. Q, K, V of L tokens (d = dv = 128, entries N(0, 0.25), seeded) at each L
# of --lengths, every applicable estimator, --samplers (default iid,orthogonal), --rows 512: wall time and peak RSS
# (/usr/bin/time), side by side in the same run with the NumPy peer measuring PosRF's error on the same 512 sampled
# rows (bench/attention_peer.py, M = 256, 20 draws, iid). One run per L (the long ones take minutes). Writes
# OUT/long_context.tsv, then bench/long_context_report.py writes bench/results/long_context.{md,png} with log-log
# slopes (and kc_variance's rows from bench/results/long_context_kc.json when present).
# usage: bash bench/long_context.sh [--kestrel BIN] [--out DIR] [--lengths "4096 8192"] [--samplers S]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KESTREL=${KESTREL_BENCH_BUILD:-$ROOT/build}/bin/kestrel
OUT=$ROOT/bench/results/tmp/long_context
LENGTHS="4096 8192 16384 32768 65536 131072" SAMPLERS=iid,orthogonal
while [ $# -gt 0 ]; do
  case $1 in
    --kestrel) KESTREL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --lengths) LENGTHS=$2; shift ;;
    --samplers) SAMPLERS=$2; shift ;;
    *) echo "usage: bash bench/long_context.sh [--kestrel BIN] [--out DIR] [--lengths \"L ...\"] [--samplers S]" >&2
       exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
. "$ROOT/scripts/blas-core.sh" "$KESTREL"
printf 'L\tcommand\tseconds\tpeak_rss_kb\n' > "$OUT/long_context.tsv"
for L in $LENGTHS; do
  /usr/bin/python3 - "$OUT" "$L" <<'PY'
import sys
import numpy as np
out, L = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(35)
for name in ("q", "k", "v"):
    np.save(f"{out}/{name}{L}.npy", 0.5 * rng.standard_normal((L, 128)))
PY
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" "$KESTREL" advise --queries "$OUT/q$L.npy" --keys "$OUT/k$L.npy" \
    --values "$OUT/v$L.npy" --rows 512 --samplers "$SAMPLERS" --quiet --json > "$OUT/advise$L.json"
  printf '%s\tadvise\t%s\t%s\n' "$L" $(cat "$OUT/time.txt") >> "$OUT/long_context.tsv"
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" /usr/bin/python3 "$ROOT/bench/attention_peer.py" \
    --queries "$OUT/q$L.npy" --keys "$OUT/k$L.npy" --values "$OUT/v$L.npy" --m 256 --sampler iid --draws 20 \
    --seed 0 --rows 512 --boot 20 > "$OUT/peer$L.json"
  printf '%s\tnumpy-peer\t%s\t%s\n' "$L" $(cat "$OUT/time.txt") >> "$OUT/long_context.tsv"
  rm -f "$OUT/q$L.npy" "$OUT/k$L.npy" "$OUT/v$L.npy"
done
/usr/bin/python3 "$ROOT/bench/long_context_report.py" "$OUT/long_context.tsv" "$ROOT/bench/results" "$SAMPLERS" \
  "$(cut -d' ' -f1 /proc/loadavg)"
