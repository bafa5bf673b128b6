#!/usr/bin/env bash
# Executes every notebook headless (nbclient) on the quick reproductions: runs
# `kestrel reproduce all --quick` into a temporary directory (or reads the outputs of such a run in
# $KESTREL_QUICK_RESULTS: ctest's reproduce_all_quick fixture), then each notebook with KESTREL_RESULTS pointing there.
# Usage: run_notebooks.sh PATH/TO/kestrel
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
# The fixture's stdout ends with the page's path only when the whole run succeeded.
if [ -n "${KESTREL_QUICK_RESULTS:-}" ] && grep -q "^all results on one page" "$KESTREL_QUICK_RESULTS.stdout" 2>/dev/null; then
  cp -r "$KESTREL_QUICK_RESULTS/." "$results/"  # a copy: the notebooks may write next to the results
else
  "$1" reproduce all --quick --quiet --out "$results" >/dev/null
fi
# bindings.ipynb, own_estimator.ipynb and advise.ipynb import the Python package built next to the CLI (build/python/kestrel).
pymod=$(cd "$(dirname "$1")/.." && pwd)/python
export PYTHONPATH="$pymod${PYTHONPATH:+:$PYTHONPATH}"
for nb in "$here"/*.ipynb; do
  case "$(basename "$nb")" in bindings.ipynb | own_estimator.ipynb | advise.ipynb) uses_python=1 ;; *) uses_python=0 ;; esac
  if [ "$uses_python" = 1 ] && ! compgen -G "$pymod/kestrel/_kestrel*.so" >/dev/null; then
    echo "skipping $(basename "$nb"): no Python module in $pymod (KESTREL_BUILD_PYTHON=OFF or no pybind11)"
    continue
  fi
  echo "executing $(basename "$nb")"
  KESTREL_RESULTS="$results" MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1 /usr/bin/python3 -Xfrozen_modules=off - "$nb" <<'PY'
import sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3").execute()
errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
sys.exit(1 if errors else 0)
PY
done
echo "all notebooks ran"
