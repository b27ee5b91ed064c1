// LookaheadKV adapters for tests: the untrained adapter of a model with its LoRA B made
// non-zero, so that the LoRA really changes the lookahead rows, saved in the test directory.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <string>

#include "model/lookahead_adapter.h"
#include "model/fingerprint.h"
#include "test_models.h"

namespace kvslim::testing {

inline LookaheadAdapter random_adapter(const Model& model, const AdapterShape& shape = {}, uint64_t seed = 3) {
  LookaheadAdapter a = LookaheadAdapter::initial(model, shape, seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> uniform(-0.2f, 0.2f);
  for (int l = 0; l < a.lora.n_layers(); ++l)
    for (LoraSite site : kAllLoraSites) {
      float* b = a.lora.b(l, site);
      for (int64_t i = 0; i < int64_t(a.lora.out(site)) * a.lora.rank(); ++i) b[i] = uniform(rng);
    }
  return a;
}

inline std::string random_adapter_path(const Model& model, const AdapterShape& shape = {}, uint64_t seed = 3) {
  const std::string path = temp_path(fmt::format("adapter-{:016x}-{}-{}-{}-{}.gguf", model_fingerprint(model),
                                                 shape.n_lookahead, shape.rank, shape.alpha, seed));
  if (!std::filesystem::exists(path)) random_adapter(model, shape, seed).save(path);
  return path;
}

}  // namespace kvslim::testing
