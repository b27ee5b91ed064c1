#!/usr/bin/env bash
# The main job: build kvslim, write a random-weight model into models/ (once), generate from it
# and print the timings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
model=models/random-demo.gguf
vocab=../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf
if [ ! -f "$model" ]; then
  vocab_args=()
  [ -f "$vocab" ] && vocab_args=(--vocab-from "$vocab")
  build/kvslim init-model --arch llama --layers 8 --dim 1024 --heads 16 --kv-heads 4 --ffn 2816 \
    --type f16 --seed 1 "${vocab_args[@]}" -o "$model"
fi
build/kvslim info "$model"
build/kvslim generate -m "$model" -p "Once upon a time, in a land far away," -n 32 --seed 1
