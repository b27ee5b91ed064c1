#!/bin/bash
# Checks that f32 KV pages are bit-identical between two kvslim binaries (for example one built
# before KV page types and one after): for every score-based method, `inspect --scores` (kept
# positions and the scores to the last bit) and `generate` (tokens, KV bytes) must match.
# Usage: scripts/compare-f32-pages.sh OLD_KVSLIM NEW_KVSLIM [MODEL] [ADAPTER]
# (NEW gets --cache-type-k f32 --cache-type-v f32; OLD must predate those options.)
set -euo pipefail
old=$1 new=$2
model=${3:-models/kvslim-small.gguf}
adapter=${4:-models/kvslim-small.lookahead.gguf}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt=$(python3 -c "print(' '.join('the quick brown fox jumps over the lazy dog number %d.' % i for i in range(40)))")
f32=(--cache-type-k f32 --cache-type-v f32)
status=0
for press in snapkv h2o tova knorm pyramidkv adakv dapq keydiff lagkv lookaheadkv; do
  extra=()
  [ "$press" == lookaheadkv ] && extra=(--press-opt "adapter=$adapter")
  common=(-m "$model" -p "$prompt" --press "$press" "${extra[@]}" --budget 64 --threads 2)
  "$old" inspect "${common[@]}" --batch 128 --scores -o "$tmp/old.json" > /dev/null 2>&1
  "$new" inspect "${common[@]}" --batch 128 --scores -o "$tmp/new.json" "${f32[@]}" > /dev/null 2>&1
  "$old" generate "${common[@]}" -n 24 --temp 0 --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['token_ids'], d['kv_bytes_peak'], d['kv_bytes_final'])" > "$tmp/old.txt"
  "$new" generate "${common[@]}" -n 24 --temp 0 --json "${f32[@]}" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['token_ids'], d['kv_bytes_peak'], d['kv_bytes_final'])" > "$tmp/new.txt"
  if cmp -s "$tmp/old.json" "$tmp/new.json" && cmp -s "$tmp/old.txt" "$tmp/new.txt"; then
    echo "$press: identical"
  else
    echo "$press: DIFFERENT"
    status=1
  fi
done
exit $status
