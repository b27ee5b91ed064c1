// How the KV-file fuzz target reads its input, shared with the test that replays the seed corpus
// (tests/test_fuzz_corpora.cpp). The expected model is the seeds' (make_kv_seeds.cpp: the tests'
// tiny model, 2 layers, 2 KV heads, head_dim 16, the byte vocabulary of 267 tokens) with the
// fingerprint the file itself names, so that a mutated fingerprint does not stop the rest being
// read. broken_promise() checks what read_kv_contents promises of what it returns (kv_file.h).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_file.h"
#include "gguf/gguf.h"

namespace kvslim::fuzz {

inline constexpr int kKvLayers = 2, kKvHeads = 2, kKvHeadDim = 16, kKvVocab = 267;
inline constexpr int64_t kKvContext = 512;

// Throws kvslim::Error for a file the reader refuses.
inline KvFileContents read_fuzz_kv(const std::vector<uint8_t>& bytes) {
  const gguf::File file = gguf::File::from_bytes(bytes, "fuzz.kv");
  KvFileExpectation expect{.n_layers = kKvLayers,
                           .n_kv_heads = kKvHeads,
                           .head_dim = kKvHeadDim,
                           .n_vocab = kKvVocab,
                           .context = kKvContext};
  expect.model_fingerprint = file.get_uint_opt("kvslim.kv.model_fingerprint").value_or(0);
  return read_kv_contents(file, expect);
}

// The first promise of kv_file.h the contents break, or nullptr.
inline const char* broken_promise(const KvFileContents& c) {
  const auto& history = c.snapshot.history;
  if (history.empty()) return "empty history";
  for (int32_t id : history)
    if (id < 0 || id >= kKvVocab) return "history id outside the vocabulary";
  for (int32_t id : c.meta.pending)
    if (id < 0 || id >= kKvVocab) return "pending id outside the vocabulary";
  if (c.snapshot.prompt.size() > history.size()) return "prompt longer than the history";
  if (c.snapshot.last_logits.size() != size_t(kKvVocab)) return "last logits not one per vocabulary entry";
  if (c.heads.size() != size_t(kKvLayers * kKvHeads)) return "not one head per (layer, KV head)";
  for (const KvFileHead& head : c.heads) {
    const size_t n = head.positions.size();
    if (int64_t(n) > kKvContext || n > history.size()) return "a head holds more than the context or history";
    if (n == 0) continue;
    if (head.keys.size() != n * row_bytes(head.key_type, kKvHeadDim)) return "key rows of the wrong size";
    if (head.values.size() != n * row_bytes(head.value_type, kKvHeadDim)) return "value rows of the wrong size";
    for (size_t i = 0; i < n; ++i) {
      if (head.positions[i] < 0 || head.positions[i] >= int64_t(history.size())) return "position outside the history";
      if (i > 0 && head.positions[i] <= head.positions[i - 1]) return "positions not ascending";
    }
  }
  return nullptr;
}

}  // namespace kvslim::fuzz
