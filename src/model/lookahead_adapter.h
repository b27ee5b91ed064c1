// LookaheadKV's trainable parts (LookaheadKV §3.1): m learned lookahead embeddings, appended
// after the prompt to glimpse at what the response will attend to, and a LoRA on the seven
// projections of every layer that is active on those rows only. Stored as its own GGUF file,
// tied to the base model by model_fingerprint (model/fingerprint.h):
//   general.architecture        "kvslim-lookahead"
//   lookahead.count             m (u32)
//   lookahead.lora_rank         r (u32)
//   lookahead.lora_alpha        alpha (f32); the LoRA scale is alpha / r
//   lookahead.base_fingerprint  the base model's fingerprint (u64)
//   lookahead.embd              f32 [dim, m] (ggml order: m rows of dim)
//   blk.N.SITE.lora_a           f32 [in, r]   (r rows of in: A)
//   blk.N.SITE.lora_b           f32 [r, out]  (out rows of r: B)
// with SITE one of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
// It lives in model/ (which owns LoRA and adapter files) so that both press/ (the lookaheadkv
// method loads it) and lookahead/ (the trainer writes it) use it without press/ reaching up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/lora.h"
#include "model/model.h"

namespace kvslim {

struct AdapterShape {
  int n_lookahead = 32;  // m
  int rank = 8;
  float alpha = 32;
  void validate() const;  // throws naming the bad value
};

struct LookaheadAdapter {
  int n_lookahead = 0;
  std::vector<float> embd;  // [n_lookahead][dim]
  LoraAdapter lora;
  uint64_t base_fingerprint = 0;

  // An untrained adapter for `base`: each lookahead embedding is the mean token embedding plus
  // Gaussian noise with the token embeddings' per-dimension standard deviation (so the rows look
  // like tokens of the vocabulary to the first layer); LoRA A uniform in +-1/sqrt(in) (as
  // LoRA's Kaiming-uniform init), B = 0, so the LoRA starts as the identity.
  static LookaheadAdapter initial(const Model& base, const AdapterShape& shape, uint64_t seed);

  // Reads an adapter and checks it against the base model: the fingerprints must match (the
  // error names both), then every tensor's presence, shape, type (f32) and finiteness.
  static LookaheadAdapter load(const std::string& path, const ModelConfig& base, uint64_t base_fingerprint);

  void save(const std::string& path) const;
};

// Where a model's adapter travels with it: MODEL.lookahead.gguf beside the model
// (models/x.gguf -> models/x.lookahead.gguf), where `kvslim train-lookahead` writes it. demo,
// claims, generate, chat and serve look there, so lookaheadkv runs without naming a file.
std::string adapter_path_beside(const std::string& model_path);
// adapter_path_beside(model_path) when that file exists, else "".
std::string adapter_beside(const std::string& model_path);

}  // namespace kvslim
