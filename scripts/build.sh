#!/usr/bin/env bash
# Configures and builds kestrel (Release) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
# A new build/ uses Ninja (a build/ made with another generator keeps it).
gen=()
[ -f build/CMakeCache.txt ] || gen=(-G Ninja)
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
