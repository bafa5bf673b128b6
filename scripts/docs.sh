#!/usr/bin/env bash
# Builds the documentation site from docs/ into BUILD/docs/html (default BUILD: build/, which must hold the built
# kestrel and Python module): the command-line reference and the output formats are generated from the binary, the
# Python API from the module's docstrings; Sphinx (Debian's python3-sphinx, python3-myst-parser, furo) with warnings
# as errors, so a missing page, heading, file or image fails the build. Nothing is written into docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
src=$build/docs/src
html=$build/docs/html
[ -x "$build/bin/kestrel" ] || { echo "docs.sh: no $build/bin/kestrel: run scripts/build.sh first" >&2; exit 2; }
rm -rf "$src" "$html"
mkdir -p "$src"
cp -r docs/. "$src/"
rm -rf "$src/tools"
/usr/bin/python3 docs/tools/cli_reference.py "$build/bin/kestrel" "$src/cli.md"
PYTHONPATH=$build/python /usr/bin/python3 docs/tools/formats_reference.py "$build/bin/kestrel" "$src/formats-generated.inc"
KESTREL_PYTHON_DIR=$build/python /usr/bin/python3 -m sphinx -W --keep-going -q -b html "$src" "$html"
echo "docs: $html/index.html"
