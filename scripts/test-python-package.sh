#!/usr/bin/env bash
# Installs the Python package as the README says (pip into a fresh venv made with --system-site-packages, Debian's
# packages only, no network) and runs the Python tests against the installed package from outside the checkout.
# Needs the Release build (scripts/build.sh), which pip reuses. Usage: scripts/test-python-package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-build-isolation --no-index "$root"
cd "$work"
KESTREL_INSTALLED=1 KESTREL_CLI="$root/build/bin/kestrel" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests"
