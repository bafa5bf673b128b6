#!/usr/bin/env bash
# The main job: sets up, builds, and runs the default variance comparison of CRT section 5.1 on the
# synthetic regimes (d = 64, L = 1024, 5 set pairs), writing HDF5 files under results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-data.sh
bash scripts/build.sh
mkdir -p results
for regime in normal sphere heterogen; do
  ./build/bin/kestrel variance --regime "$regime" --sigma 0.25,0.5,0.75,1 --dim 64 --points 1024 --pairs 5 \
    --seed 1 --estimators trig,trig-real,pos,gerf,oprf --kernel gaussian --out "results/variance-$regime.h5" --quiet
  echo "wrote results/variance-$regime.h5"
  echo
done
