#!/usr/bin/env bash
# Installs the Python package as the README says (pip into a fresh venv made with --system-site-packages, Debian's
# packages only, no network) and runs the Python tests against the installed package from outside the checkout, one
# test file per core at a time (pytest-xdist, --dist loadfile: a file's module fixtures are made once).
# Needs the Release build (scripts/build.sh), which pip reuses. Usage: scripts/test-python-package.sh [JUNIT.xml]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
junit=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# pip may write only into the build*/ folders that .gitignore names (build/ for CMake, build-pip/ for setuptools).
untracked() { git -C "$root" status --porcelain --ignored --untracked-files=all 2>/dev/null | grep -v ' build[^/]*/' || true; }
before=$(untracked)
"$work/venv/bin/pip" install -q --no-build-isolation --no-index "$root"
after=$(untracked)
if [ "$before" != "$after" ]; then
  echo "pip install left files in the source tree outside build*/:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
cd "$work"
KESTREL_INSTALLED=1 KESTREL_CLI="$root/build/bin/kestrel" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -n "$(nproc)" --dist loadfile \
  ${junit:+--junitxml "$junit"} "$root/python/tests"
