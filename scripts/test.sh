#!/usr/bin/env bash
# Installs every dependency (the test tools too), builds everything (the command, the test suites,
# the micro-benchmarks) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build && ctest --output-on-failure -j 2
