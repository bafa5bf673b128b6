#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (the README's test command; .ci/run calls it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-data.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
bash scripts/test-python-package.sh  # the Python tests again, against `pip install .` in a fresh venv
bash scripts/test-sanitize.sh        # the whole suite again under ASan + UBSan (build-asan/): a memory error fails
