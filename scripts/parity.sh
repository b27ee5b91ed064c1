#!/usr/bin/env bash
# kvslim against llama.cpp on one random-weight model of an architecture (docs/parity.md):
# perplexity of the same text within 0.5%, and 32 greedy tokens identical.
#
#   scripts/parity.sh ARCH [LLAMA_BIN]
#
# ARCH: llama, qwen2, qwen3, phi3, smollm3, gemma3, qwen3moe or gpt-oss. LLAMA_BIN (or the env var of that name): a folder
# of an existing llama.cpp build holding llama-perplexity, llama-completion and libllama.so; its
# headers are taken from LLAMA_SRC (default: LLAMA_BIN/../..). This script never builds
# llama.cpp; it compiles only scripts/llama_logits.cpp, a small client of libllama.
# Env: KVSLIM (default build/kvslim), TEXT (default docs/methods.md), WEIGHT_STD (0.1),
# WORK (a temporary folder), THREADS (2), TYPE (the matrices' type, f32; e.g. mxfp4 or q4_0: any
# type init-model writes and llama.cpp reads).
set -euo pipefail

ARCH=${1:?usage: scripts/parity.sh ARCH [LLAMA_BIN]}
LLAMA_BIN=${2:-${LLAMA_BIN:?give llama.cpp\'s binary folder as the second argument or LLAMA_BIN}}
LLAMA_SRC=${LLAMA_SRC:-$LLAMA_BIN/../..}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KVSLIM=${KVSLIM:-$ROOT/build/kvslim}
TEXT=${TEXT:-$ROOT/docs/methods.md}
WEIGHT_STD=${WEIGHT_STD:-0.1}
THREADS=${THREADS:-2}
TYPE=${TYPE:-f32}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
SHARED=${KVSLIM_SHARED_DIR:-$ROOT/../shared}

for tool in llama-perplexity llama-completion; do
  [ -x "$LLAMA_BIN/$tool" ] || { echo "error: $LLAMA_BIN/$tool not found (build it in llama.cpp first)" >&2; exit 1; }
done
[ -x "$KVSLIM" ] || { echo "error: $KVSLIM not found (build kvslim first)" >&2; exit 1; }

# The tokenizer each architecture's real files carry: SentencePiece for llama and phi3, BPE for
# qwen and smollm3.
# gemma3's own vocabulary is not among the test vectors: SentencePiece's llama one stands in.
EXTRA=()
FFN=512
case "$ARCH" in
  llama) VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-llama-spm.gguf ;;
  gemma3)
    VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-llama-spm.gguf
    # Layers 0, 1 and 3 slide over 64 tokens (every third layer is global), so the 256-token
    # chunks and the greedy run both reach past the window.
    EXTRA=(--window 64 --swa-period 3)
    ;;
  phi3) VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-phi-3.gguf ;;
  qwen2 | qwen3 | smollm3) VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-gpt-2.gguf ;;
  qwen3moe)
    VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-gpt-2.gguf
    # 16 experts of width 128, 4 per token: routing decides which quarter of the FFN runs.
    EXTRA=(--experts 16 --experts-used 4)
    FFN=128
    ;;
  gpt-oss)
    # gpt-oss's o200k vocabulary is not among the test vectors: GPT-2's stands in. Layers 0 and 2
    # slide over 64 tokens; 16 experts of width 128, 4 per token; sinks, biases and YaRN as
    # init-model writes them.
    VOCAB=$SHARED/tokenizer-vectors/ggml-vocab-gpt-2.gguf
    EXTRA=(--experts 16 --experts-used 4 --window 64)
    FFN=128
    ;;
  *) echo "error: unsupported architecture '$ARCH' (supported: llama, qwen2, qwen3, phi3, smollm3, gemma3, qwen3moe, gpt-oss)" >&2; exit 1 ;;
esac

LOGITS=$WORK/llama_logits
if [ ! -x "$LOGITS" ]; then
  c++ -O2 -std=c++17 -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" "$ROOT/scripts/llama_logits.cpp" \
    -L"$LLAMA_BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA_BIN" -o "$LOGITS"
fi

MODEL=$WORK/$ARCH-$TYPE.gguf
# Context 4096: Phi-3's file says it was trained on 2048 (LongRoPE), so the 256-token perplexity
# chunks use the short factors and the 4096-token greedy run the long ones, in both programs.
"$KVSLIM" init-model --arch "$ARCH" --layers 4 --dim 256 --heads 4 --kv-heads 2 --ffn "$FFN" --type "$TYPE" \
  --ctx 4096 --weight-std "$WEIGHT_STD" --seed 3 --vocab-from "$VOCAB" "${EXTRA[@]}" -o "$MODEL" 2>/dev/null
echo "model: $MODEL ($ARCH, 4 layers, dim 256, 4/2 heads, ffn $FFN ${EXTRA[*]}, $TYPE, weight std $WEIGHT_STD)"

# 1. Perplexity, chunks of 256, second half scored; f32 KV cache on both sides.
# Flash attention off in llama.cpp (its default "auto" turns it on): its blocked softmax rounds
# differently, enough to flip a near-tie between two tokens; kvslim's attention is the plain one.
PPL_LLAMA=$("$LLAMA_BIN/llama-perplexity" -m "$MODEL" -f "$TEXT" -c 256 -b 256 -t "$THREADS" -ctk f32 -ctv f32 -fa off \
  2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
PPL_KVSLIM=$("$KVSLIM" perplexity -m "$MODEL" -f "$TEXT" --ctx 256 --batch 256 --threads "$THREADS" \
  --cache-type-k f32 --cache-type-v f32 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
[ -n "$PPL_LLAMA" ] && [ -n "$PPL_KVSLIM" ] || { echo "error: a perplexity run printed no estimate" >&2; exit 1; }
DIFF=$(awk -v a="$PPL_KVSLIM" -v b="$PPL_LLAMA" 'BEGIN { printf "%+.4f", 100 * (a - b) / b }')
echo "perplexity: llama.cpp $PPL_LLAMA, kvslim $PPL_KVSLIM, difference $DIFF%"
PPL_OK=$(awk -v d="$DIFF" 'BEGIN { print (d < 0 ? -d : d) <= 0.5 ? "yes" : "no" }')

# 2. 32 greedy tokens after the same prompt, each program tokenizing it (with BOS where the
# vocabulary asks for one), context 4096. No stop at EOS in llama_logits; kvslim's stop at EOS
# would end its list early, so the lists are compared over kvslim's length, which is printed.
PROMPT="The history of the city begins"
LLAMA_OUT=$("$LOGITS" "$MODEL" --prompt "$PROMPT" --greedy 32 --ctx 4096)
IDS=$(sed -n 's/^prompt //p' <<<"$LLAMA_OUT" | tr ' ' ',')
GREEDY_LLAMA=$(sed -n 's/^greedy //p' <<<"$LLAMA_OUT")
KVSLIM_JSON=$("$KVSLIM" generate -m "$MODEL" -p "$PROMPT" -n 32 --temp 0 --ctx 4096 --threads "$THREADS" \
  --cache-type-k f32 --cache-type-v f32 --json 2>/dev/null)
GREEDY_KVSLIM=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["token_ids"])))' <<<"$KVSLIM_JSON")
KVSLIM_TEXT=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["text"], end="")' <<<"$KVSLIM_JSON")
# How far from flat the logits are: llama.cpp's logits after the prompt, their standard
# deviation and the gap between the two largest.
N_IDS=$(tr ',' '\n' <<<"$IDS" | wc -l)
"$LOGITS" "$MODEL" --tokens "$IDS" --positions $((N_IDS - 1)) --ctx 4096 | python3 -c '
import sys, statistics
v = [float(x) for x in sys.stdin.readline().split()[2:]]
top = sorted(v, reverse=True)
print(f"logits after the prompt: std {statistics.pstdev(v):.3f}, top-1 minus top-2 {top[0] - top[1]:.3f}")'

N_KVSLIM=$(wc -w <<<"$GREEDY_KVSLIM")
PREFIX_LLAMA=$(tr ' ' '\n' <<<"$GREEDY_LLAMA" | head -n "$N_KVSLIM" | paste -sd' ')
echo "greedy llama.cpp: $GREEDY_LLAMA"
echo "greedy kvslim:    $GREEDY_KVSLIM"
GREEDY_OK=$([ "$PREFIX_LLAMA" = "$GREEDY_KVSLIM" ] && [ "$N_KVSLIM" -gt 0 ] && echo yes || echo no)
echo "greedy: $N_KVSLIM tokens compared, identical: $GREEDY_OK"

# The same continuation as text from llama.cpp's own generation tool.
COMPLETION=$("$LLAMA_BIN/llama-completion" -m "$MODEL" -p "$PROMPT" -n 32 --temp 0 --ignore-eos -c 4096 \
  -t "$THREADS" -ctk f32 -ctv f32 -fa off -no-cnv --no-display-prompt --simple-io 2>/dev/null || true)
echo "llama-completion text: $(printf '%q' "$COMPLETION")"
echo "kvslim generate text:  $(printf '%q' "$KVSLIM_TEXT")"
echo "texts identical: $([ "$COMPLETION" = "$KVSLIM_TEXT" ] && echo yes || echo no)"

[ "$PPL_OK" = yes ] && [ "$GREEDY_OK" = yes ] && echo "parity $ARCH: ok" || { echo "parity $ARCH: FAILED"; exit 1; }
