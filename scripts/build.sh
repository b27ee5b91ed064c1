#!/usr/bin/env bash
# Installs the dependencies and builds into build/ (Release, -O3): the targets named, e.g.
# `scripts/build.sh kvslim` (the command alone: what scripts/demo.sh builds), or with no argument
# all of them (the command, the test suites, the micro-benchmarks: what scripts/test.sh builds).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  scripts/install-deps.sh --build-only
else
  scripts/install-deps.sh
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build "${targets[@]}"
