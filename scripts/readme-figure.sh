#!/usr/bin/env bash
# Regenerates the README's figure, docs/img/memory-vs-score.svg: mean score against KV memory for
# several methods at budgets 32-256 on the default model (models/kvslim-4k.gguf, with its
# LookaheadKV adapter models/kvslim-4k.lookahead.gguf), on four retrieval tasks at 1024 tokens,
# 5 held-out samples each (500 runs). Greedy decoding and seeded samples, so the scores are reproducible;
# the KV bytes follow the default f16 pages of 32 tokens. Takes a few minutes on 2 cores. Needs a
# built build/kvslim (scripts/build.sh kvslim); KVSLIM=path/to/kvslim runs another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
kvslim=${KVSLIM:-build/kvslim}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$kvslim" eval -m models/kvslim-4k.gguf \
  --methods full,streaming_llm,snapkv,keydiff,dapq,laq,lookaheadkv:adapter=models/kvslim-4k.lookahead.gguf \
  --budgets 32,64,128,256 --tasks niah_single_1,niah_single_2,passkey,niah_multikey_1 --lengths 1024 \
  --samples 5 --out "$out/eval"
"$kvslim" plot "$out/eval" -o "$out/plots"
mkdir -p docs/img
cp "$out/plots/memory_vs_score.svg" docs/img/memory-vs-score.svg
cp "$out/eval/summary.md" docs/img/memory-vs-score.md
echo "wrote docs/img/memory-vs-score.svg (summary table: docs/img/memory-vs-score.md)"
