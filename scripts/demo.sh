#!/usr/bin/env bash
# The main job: build the kvslim command (only it: the tests and benchmarks are scripts/test.sh's),
# then compare the full KV cache with several eviction methods at a few budgets on the default
# model (models/kvslim-4k.gguf, trained by kvslim itself to retrieve facts from long prompts): a
# table of score, KV memory and speed, plus SVG charts in demo-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh kvslim
build/kvslim demo "$@"
