// What the forward-pass tests of every architecture share (test_forward.cpp, test_gemma3.cpp,
// test_phi3_smollm3.cpp): the engine's logits of a prompt run in blocks, their distance from a
// reference computed in the test, and copies of a GGUF file with something broken in them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kv/paged_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "test_models.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim::testing {

// A reference's logits: one vector per position, computed in double.
using Vec = std::vector<double>;

// n token ids spread over the vocabulary.
inline std::vector<int32_t> test_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11) % n_vocab;
  return t;
}

// All logits of a prompt run as blocks of `block` tokens ([tokens][n_vocab]); n_ctx is the
// run's context as Forward takes it (it picks Phi-3's RoPE factors); page_tokens 0 is the cache's default.
inline std::vector<float> engine_logits(const Model& model, const std::vector<int32_t>& tokens, int block,
                                        int threads = 2, int n_ctx = 0, int page_tokens = 0) {
  ThreadPool pool(threads);
  PagedKvCache cache = page_tokens > 0 ? PagedKvCache(kv_shape(model), int64_t(tokens.size()), page_tokens)
                                       : PagedKvCache(kv_shape(model), int64_t(tokens.size()));
  Forward forward(model, block, n_ctx);
  const int n_vocab = model.config().n_vocab;
  std::vector<float> all;
  for (size_t start = 0; start < tokens.size(); start += size_t(block)) {
    const int n = int(std::min<size_t>(size_t(block), tokens.size() - start));
    const float* logits = forward.run(tokens.data() + start, n, int64_t(start), cache, pool, true);
    all.insert(all.end(), logits, logits + int64_t(n) * n_vocab);
  }
  return all;
}

// max |engine - reference| / max |reference| over every logit of every position.
inline double relative_error(const std::vector<float>& got, const std::vector<Vec>& want) {
  double err = 0, scale = 0;
  const size_t n_vocab = want[0].size();
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t i = 0; i < n_vocab; ++i) {
      err = std::max(err, std::abs(got[t * n_vocab + i] - want[t][i]));
      scale = std::max(scale, std::abs(want[t][i]));
    }
  return err / scale;
}

// Decides, per tensor of the copy, whether it is written (true) and with which dims and bytes.
using TensorEdit =
    std::function<bool(const gguf::TensorInfo& t, std::vector<uint64_t>& dims, std::vector<uint8_t>& bytes)>;

// A copy of `path` named `name` in the test folder, with its metadata changed by `edit_metadata`
// and its tensors by `edit_tensor` (either may be empty).
inline std::string edited_copy(const std::string& path, const std::string& name,
                               const std::function<void(gguf::Writer&)>& edit_metadata,
                               const TensorEdit& edit_tensor = {}) {
  const gguf::File in = gguf::File::open(path);
  gguf::Writer w;
  for (const auto& entry : in.metadata()) w.set(entry.key, entry.value);
  if (edit_metadata) edit_metadata(w);
  for (const gguf::TensorInfo& t : in.tensors()) {
    std::vector<uint64_t> dims = t.dims;
    std::vector<uint8_t> bytes(in.tensor_data(t), in.tensor_data(t) + t.n_bytes);
    if (!edit_tensor || edit_tensor(t, dims, bytes)) w.add_tensor(t.name, t.type, dims, bytes);
  }
  const std::string out = temp_path(name);
  w.write(out);
  return out;
}

// A TensorEdit that leaves out the tensor `name` and keeps the rest as they are.
inline TensorEdit without(const std::string& name) {
  return [name](const gguf::TensorInfo& t, std::vector<uint64_t>&, std::vector<uint8_t>&) { return t.name != name; };
}

// Loading `path` fails with an error containing `needle`.
inline void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    Model::load(path);
    ADD_FAILURE() << "loaded " << path << ", expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace kvslim::testing
