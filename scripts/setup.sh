#!/usr/bin/env bash
# Installs kestrel's dependencies from Debian packages when they are missing (idempotent).
# Runs apt-get directly as root (CI), through sudo otherwise.
set -euo pipefail
PKGS=(g++ cmake make ninja-build ccache pkg-config git
      libarmadillo-dev libopenblas-dev liblapack-dev libboost-dev libgsl-dev libhdf5-dev libtbb-dev
      libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-numpy python3-scipy python3-h5py python3-matplotlib python3-pil python3-nbclient python3-nbformat
      python3-ipykernel pybind11-dev python3-dev python3-pytest
      python3-pytest-xdist  # scripts/test-python-package.sh: the Python test files on both cores
      python3-sklearn python3-pandas python3-venv python3-pip python3-setuptools
      python3-torch  # kestrel.torch tests (python/tests/test_torch.py); kestrel itself does not need it
      clang clang-format libclang-rt-14-dev libssl-dev
      libopenmpi-dev openmpi-bin libceres-dev libtomlplusplus-dev
      slurm-wlm munge  # tests/slurm/: a one-node Slurm for the job-array sweeps
      python3-sphinx python3-myst-parser furo  # scripts/docs.sh: the documentation site
      chromium)  # chromium: tests/browser_test.py and docs_browser_test.py render results/index.html and the docs
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "[setup] installing: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
