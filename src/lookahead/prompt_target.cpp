#include "lookahead/prompt_target.h"

#include <algorithm>

#include "kv/paged_cache.h"
#include "model/forward.h"
#include "press/attention_accumulator.h"
#include "util/error.h"

namespace kvslim {

namespace {
constexpr int kBlock = 256;  // prefill block
}  // namespace

PromptTarget<float> prompt_target(const Model& model, ThreadPool& pool, const std::vector<int32_t>& prompt,
                                  const std::vector<int32_t>& response, std::vector<float>* window_votes, int window) {
  if (prompt.empty() || response.empty()) fail("a LookaheadKV training example needs a prompt and a response");
  const ModelConfig& c = model.config();
  const int64_t n = int64_t(prompt.size());
  PagedKvCache cache(kv_shape(model), n + int64_t(response.size()));  // f32: the training target
  Forward forward(model, kBlock);
  auto run = [&](const std::vector<int32_t>& tokens, int64_t pos0) {
    for (size_t start = 0; start < tokens.size(); start += kBlock) {
      const int len = int(std::min<size_t>(kBlock, tokens.size() - start));
      forward.run(tokens.data() + start, len, pos0 + int64_t(start), cache, pool);
    }
  };
  AttentionAccumulator votes;
  if (window_votes) {
    votes.reset(c, n, n - window);
    cache.set_probe(&votes);
  }
  run(prompt, 0);
  if (window_votes) {
    window_votes->resize(size_t(c.n_layers) * c.n_heads * n);
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        std::copy_n(votes.q_head_sums(l, h), n, &(*window_votes)[(size_t(l) * c.n_heads + h) * n]);
  }
  AttentionAccumulator truth;
  truth.reset(c, n, n);
  cache.set_probe(&truth);
  run(response, n);
  cache.set_probe(nullptr);

  PromptTarget<float> t;
  t.n = n;
  t.importance.resize(size_t(c.n_layers) * c.n_heads * n);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      const float* sums = truth.q_head_sums(l, h);
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += sums[j];
      float* out = &t.importance[(size_t(l) * c.n_heads + h) * n];
      for (int64_t j = 0; j < n; ++j) out[j] = float(sums[j] / total);
    }
  const int hd = c.head_dim;
  t.keys.resize(size_t(c.n_layers) * c.n_kv_heads * n * hd);
  t.values.resize(t.keys.size());
  for (int l = 0; l < c.n_layers; ++l)
    for (int g = 0; g < c.n_kv_heads; ++g) {
      const HeadCache& head = cache.head(l, g);
      const size_t off = (size_t(l) * c.n_kv_heads + g) * n * hd;
      for (int64_t i = 0; i < n; ++i) {
        std::copy_n(head.key_f32(i, &t.keys[off + i * hd]), hd, &t.keys[off + i * hd]);
        std::copy_n(head.value_f32(i, &t.values[off + i * hd]), hd, &t.values[off + i * hd]);
      }
    }
  return t;
}

}  // namespace kvslim
