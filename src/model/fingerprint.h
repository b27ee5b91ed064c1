// A 64-bit fingerprint of a model, so that files made for one model (LookaheadKV adapters) can
// refuse to load on another. FNV-1a 64 over, in order: the tag "kvslim-model-fingerprint-v1";
// the architecture name and the ModelConfig fields that shape the computation (layers, dim, ffn,
// heads, KV heads, head size, rotary dims, vocabulary, RMS epsilon and RoPE base as IEEE bits;
// not the context length, which only limits requests); then, for
// every tensor of the file in name order, its name, ggml type, dims and a sample of its bytes:
// all of them for tensors up to 4 KiB, else 16 evenly spaced 256-byte slices (first and last
// included). Sampling keeps it cheap on multi-GB files; any retraining or requantisation of a
// matrix changes the sampled bytes.
#pragma once

#include <cstdint>

#include "model/model.h"

namespace kvslim {

uint64_t model_fingerprint(const Model& model);

}  // namespace kvslim
