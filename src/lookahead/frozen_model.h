// The base model's weights as plain row-major arrays of the training scalar (float, or double
// for the finite-difference tests), for LookaheadKV training: the base model stays frozen, and
// its weights only carry gradients through to the lookahead rows.
#pragma once

#include <vector>

#include "model/lora.h"
#include "model/model.h"
#include "tensor/ops.h"

namespace kvslim {

template <class T>
struct FrozenLayer {
  std::vector<T> attn_norm, ffn_norm;
  std::vector<T> bq, bk, bv;      // qwen2 only, else empty
  std::vector<T> q_norm, k_norm;  // qwen3 only, else empty
  std::vector<T> w[kLoraSites];   // the seven projections, [out][in], indexed by LoraSite
};

template <class T>
struct FrozenModel {
  explicit FrozenModel(const Model& model);  // the Model must outlive it (RoPE factors)
  ModelConfig config;
  RopeConfig rope;
  std::vector<FrozenLayer<T>> layers;
};

}  // namespace kvslim
