#!/usr/bin/env bash
# Regenerates the README's figure, docs/img/memory-vs-score.svg: mean score against KV memory for
# several methods at budgets 32-256 on the default model (models/kvslim-small.gguf), on three
# retrieval tasks at 1024 tokens, 10 held-out samples each. Greedy decoding and seeded samples,
# so the scores are reproducible; the KV bytes follow the default f16 pages of 32 tokens.
# Takes a few minutes on 2 cores. Needs a built build/kvslim (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
build/kvslim eval -m models/kvslim-small.gguf \
  --methods full,streaming_llm,snapkv,keydiff,dapq,laq,lookaheadkv:adapter=models/kvslim-small.lookahead.gguf \
  --budgets 32,64,128,256 --tasks niah_single_1,niah_single_2,passkey --lengths 1024 --samples 10 \
  --out "$out/eval"
build/kvslim plot "$out/eval" -o "$out/plots"
mkdir -p docs/img
cp "$out/plots/memory_vs_score.svg" docs/img/memory-vs-score.svg
cp "$out/eval/summary.md" docs/img/memory-vs-score.md
echo "wrote docs/img/memory-vs-score.svg (summary table: docs/img/memory-vs-score.md)"
