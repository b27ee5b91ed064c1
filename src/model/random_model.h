// Writes a llama-family GGUF model with random weights: the models tests and benchmarks run on
// (no pretrained weights can be downloaded here). The tokenizer is copied from a vocab GGUF, or
// is the built-in byte vocabulary when vocab_path is empty.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"
#include "tensor/dtype.h"

namespace kvslim {

struct RandomModelSpec {
  ModelConfig config;        // n_vocab is taken from the vocabulary file
  DType type = DType::F16;   // type of every matrix; norms and biases stay f32
  bool tied_output = false;  // omit output.weight (the embedding is reused)
  bool rope_freqs = false;   // write a rope_freqs.weight factor tensor (Llama 3.1 style)
  // Standard deviation of the matrices' entries; 0: 1/sqrt(inputs), which keeps activations O(1)
  // and logits nearly flat. Larger values make greedy decoding decisive (parity tests).
  float weight_std = 0.0f;
  // Rotated dimensions per head; 0: the whole head, except phi3: 3/4 of it (Phi-4-mini's 96 of 128).
  int rope_dims = 0;
  uint64_t seed = 1;
  // gemma3: the sliding window (0: none, every layer global) and the period of its layer pattern
  // (llama.cpp's 6 is left out of the file, as its converter does).
  int sliding_window = 0;
  int swa_period = 6;
};

// Sets the tokenizer.* keys of `vocab_path` (a vocab or model GGUF), or of the built-in byte
// vocabulary when it is empty, and returns the vocabulary size. Also used by the trainer's export.
int copy_vocab(const std::string& vocab_path, gguf::Writer& writer);

// Throws kvslim::Error for an inconsistent shape or an unreadable vocabulary file.
void write_random_model(const RandomModelSpec& spec, const std::string& vocab_path, const std::string& out_path);

}  // namespace kvslim
