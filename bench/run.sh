#!/usr/bin/env bash
# Issue #8's benchmarks in one command: builds kestrel_bench and the CLI, runs kestrel's benchmarks (Google Benchmark)
# and the NumPy peer (bench/numpy_peer.py) on identical data, and writes bench/results/ (results.md, results.csv,
# scaling.png, the raw JSON). Timing is not part of the test suite.
# usage: bash bench/run.sh [--e2e] [--quick] [--no-large]
#   --e2e    also time every `kestrel reproduce NAME` at paper settings (bench/reproductions.sh; ~10-25 min)
#   --quick  smoke run: short benchmark repetitions, NumPy peer at L = 1024 only, no L = 65536 memory run
#   --no-large  skip the L = 65536 memory run (PosRF pairwise variance, ~4.3e9 pairs: minutes even on a quiet machine)
# env: KESTREL_BENCH_BUILD (build dir, default build/), KESTREL_THREADS (default: all cores)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KESTREL_BENCH_BUILD:-$ROOT/build}
OUT=$ROOT/bench/results
TMP=$OUT/tmp
E2E=0 QUICK=0 LARGE=1
for a in "$@"; do
  case $a in
    --e2e) E2E=1 ;;
    --quick) QUICK=1 LARGE=0 ;;
    --no-large) LARGE=0 ;;
    *) echo "usage: bash bench/run.sh [--e2e] [--quick] [--no-large]" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3  # Debian's python3 with numpy/scipy/matplotlib (not a pyenv)
mkdir -p "$TMP"

echo "[bench] machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "[bench] load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > 0.5 * n) }'; then
  echo "[bench] WARNING: the machine is loaded (load $load1 on $(nproc) cores): timings below are noisy and" \
       "pessimistic; rerun on a quiet machine for the numbers to quote." >&2
fi
cut -d' ' -f1-3 /proc/loadavg > "$TMP/load_before.txt"

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKESTREL_BUILD_BENCH=ON > "$TMP/cmake.log"
cmake --build "$BUILD" -j"$(nproc)" --target kestrel_bench kestrel_cli > "$TMP/build.log"
BENCH=$BUILD/bin/kestrel_bench
KESTREL=$BUILD/bin/kestrel
. "$ROOT/scripts/blas-core.sh" "$KESTREL"  # the same OpenBLAS kernels for kestrel and the NumPy peer
echo "[bench] OpenBLAS core: ${OPENBLAS_CORETYPE:-as detected}"

rss() { grep 'Maximum resident set size' "$1" | awk '{print $NF}'; }  # KiB
wall() { grep 'Elapsed (wall clock)' "$1" | awk '{print $NF}'; }

echo "[bench] dumping shared data and kestrel's reference values"
"$BENCH" --dump "$TMP/dump"

echo "[bench] kestrel benchmarks (Google Benchmark)"
GB_ARGS=(--benchmark_out="$OUT/kestrel_bench.json" --benchmark_out_format=json)
[ "$QUICK" = 1 ] && GB_ARGS+=(--benchmark_min_time=0.01 --benchmark_filter='L:1024/|feature|dgemm|nw_|fit/oprf')
/usr/bin/time -v -o "$TMP/time_bench.txt" "$BENCH" "${GB_ARGS[@]}"
echo "kestrel_bench $(rss "$TMP/time_bench.txt")" > "$TMP/rss.txt"

if [ "$LARGE" = 1 ]; then
  echo "[bench] memory: pairwise variance of PosRF at L = 65536 (must stay within 2 GiB)"
  KESTREL_BENCH_LARGE=1 /usr/bin/time -v -o "$TMP/time_large.txt" "$BENCH" --benchmark_filter=pairwise_large \
    --benchmark_out="$OUT/kestrel_bench_large.json" --benchmark_out_format=json
  echo "pairwise_large_L65536 $(rss "$TMP/time_large.txt")" >> "$TMP/rss.txt"
fi

echo "[bench] NumPy peer ($($PY -c 'import numpy, scipy; print("numpy", numpy.__version__, "scipy", scipy.__version__)'))"
PEER_ARGS=("$TMP/dump" "$OUT/numpy_peer.json")
[ "$QUICK" = 1 ] && PEER_ARGS+=(--quick)
/usr/bin/time -v -o "$TMP/time_peer.txt" $PY "$ROOT/bench/numpy_peer.py" "${PEER_ARGS[@]}"
echo "numpy_peer $(rss "$TMP/time_peer.txt")" >> "$TMP/rss.txt"

echo "[bench] reduced crt-fig2 study through the CLI (same points and sigmas as the NumPy peer)"
$PY - "$TMP/dump" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
for s in "XY":
    a = np.fromfile(f"{d}/{s}_1024.bin", dtype="<f8").reshape(-1, 64)  # rows = points
    np.savetxt(f"{d}/{s}_1024.csv", a, delimiter=",", fmt="%.17g")
EOF
/usr/bin/time -v -o "$TMP/time_variance.txt" "$KESTREL" variance --regime file --x-file "$TMP/dump/X_1024.csv" \
  --y-file "$TMP/dump/Y_1024.csv" --dim 64 --points 1024 --pairs 1 --sigma 0.2,0.6,1 \
  --estimators trig,gerf,pois,geom,pos,oprf --kernel gaussian --halve-real --json > "$OUT/kestrel_variance.json"
echo "variance_study $(wall "$TMP/time_variance.txt")" > "$TMP/wall.txt"
echo "[bench] issue #19's crt-fig2 cell through the CLI (11 estimators, 5 set pairs; the NumPy peer draws the same)"
/usr/bin/time -v -o "$TMP/time_cell.txt" "$KESTREL" variance --regime normal --sigma 1 --dim 64 --points 1024 \
  --pairs 5 --estimators trig,pos,gerf,oprf,pois,geom,pois+,geom+,aderf,sderf,saderf --json > "$OUT/kestrel_cell.json"
echo "crt_fig2_cell $(wall "$TMP/time_cell.txt")" >> "$TMP/wall.txt"

if [ "$E2E" = 1 ]; then
  # Every reproduction at paper settings, one after another (bench/reproductions.sh: wall time and load before each,
  # table in $TMP/reproductions/times.md; bench/results/reproductions.md quotes it).
  echo "[bench] end to end: every kestrel reproduce NAME at paper settings"
  KESTREL_BENCH_BUILD=$BUILD bash "$ROOT/bench/reproductions.sh" --out "$TMP/reproductions"
  tail -n +2 "$TMP/reproductions/times.tsv" | awk -F'\t' '{ print "e2e_" $1, $2 }' >> "$TMP/wall.txt"
fi
cut -d' ' -f1-3 /proc/loadavg > "$TMP/load_after.txt"

$PY "$ROOT/bench/report.py" "$OUT"
echo "[bench] wrote $OUT/results.md, results.csv, scaling.png"
