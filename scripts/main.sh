#!/usr/bin/env bash
# The main job: sets up, installs the data, builds, and reproduces every paper figure/table at paper
# settings (`kestrel reproduce all`): results/<name>.{h5,png,claims.md,claims.json}, and results/index.html, one page
# with every figure and claims table (the last line printed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-data.sh
bash scripts/build.sh
. scripts/blas-core.sh ./build/bin/kestrel  # OpenBLAS's fast kernels where it cannot detect the CPU (issue #19)
# --force: rerunning the main job replaces the previous results/ (kestrel never replaces a file without it).
./build/bin/kestrel reproduce all --force --out results
echo "results, plots and claim summaries are in $(pwd)/results/"
echo "the results page (every figure and claim; open it in a browser): $(pwd)/results/index.html"
