#!/usr/bin/env bash
# Requests/s, time to first token and KV memory of `kvslim serve` for 1 and 4 concurrent clients at
# ~1K-token prompts, full cache vs SnapKV at 256 tokens per head: a fresh server per row (so no row
# finds another's caches), driven by scripts/serve-bench.mjs. Prints one JSON line per row.
#   scripts/serve-load.sh [MODEL] [EXTRA SERVE ARGS...]     (default: models/kvslim-small.gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/kvslim-small.gguf}
shift || true
bin=${KVSLIM:-build/kvslim}
log=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
echo "# load: $(cat /proc/loadavg)" >&2
for press in full snapkv; do
  for clients in 1 4; do
    "$bin" serve -m "$model" --port 0 --threads 2 --parallel 4 --ctx 2048 "$@" 2>"$log" &
    pid=$!
    port=""
    for _ in $(seq 300); do  # bounded: 30 s
      port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
      [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
      sleep 0.1
    done
    requests=$([ "$clients" = 1 ] && echo 4 || echo 2)
    extra=()
    [ "$press" = snapkv ] && extra=(--press snapkv --budget 256)
    node scripts/serve-bench.mjs --url "http://127.0.0.1:$port" --clients "$clients" --requests "$requests" \
      --tokens 1024 --max-tokens 32 "${extra[@]}"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
echo "# load: $(cat /proc/loadavg)" >&2
