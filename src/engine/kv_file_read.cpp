// Reading compressed-KV files: every count, type, shape, position and token id checked before
// anything is returned (kv_file.h). Apart from the writer and the engine, so that the fuzz target
// links the reader alone.
#include <fmt/format.h>

#include <cstring>
#include <tuple>
#include <utility>

#include "engine/kv_file.h"
#include "engine/kv_file_format.h"
#include "gguf/gguf.h"
#include "util/error.h"

namespace kvslim {

using namespace kv_file;

namespace {

// A K or V tensor of one head: any KV page type, n rows of head_dim; returns its type and bytes.
std::pair<DType, std::vector<uint8_t>> read_rows(const gguf::File& file, const std::string& name, int64_t n,
                                                 uint64_t head_dim) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("tensor {} is missing", name);
  DType type = DType::F32;
  bool kv_type = false;
  for (DType candidate : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
    if (t->type == ggml_type_id(candidate)) type = candidate, kv_type = true;
  if (!kv_type)
    fail("tensor {} has element type {}, expected f32, f16, bf16 or q8_0", name, gguf::tensor_type_name(t->type));
  if (t->n_elements != uint64_t(n) * head_dim)
    fail("tensor {} has {} elements, expected {}", name, t->n_elements, uint64_t(n) * head_dim);
  const size_t bytes = row_bytes(type, int64_t(head_dim)) * size_t(n);
  if (t->n_bytes != bytes) fail("tensor {} holds {} bytes, expected {}", name, t->n_bytes, bytes);
  const uint8_t* data = file.tensor_data(*t);
  return {type, std::vector<uint8_t>(data, data + bytes)};
}

// A tensor that must exist with the given type and element count; returns its bytes.
const uint8_t* tensor(const gguf::File& file, const std::string& name, uint32_t type, uint64_t n_elements) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("tensor {} is missing", name);
  if (t->type != type)
    fail("tensor {} has element type {}, expected {}", name, gguf::tensor_type_name(t->type),
         gguf::tensor_type_name(type));
  if (t->n_elements != n_elements) fail("tensor {} has {} elements, expected {}", name, t->n_elements, n_elements);
  return file.tensor_data(*t);
}

template <class T>
std::vector<T> read_array(const gguf::File& file, const std::string& name, uint32_t type, uint64_t n) {
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), tensor(file, name, type, n), n * sizeof(T));
  return v;
}

}  // namespace

KvFileContents read_kv_contents(const gguf::File& file, const KvFileExpectation& expect) {
  KvFileContents c;
  if (file.get_string_opt("kvslim.kv.format") != std::string(kFormat))
    fail("not a kvslim KV file (no kvslim.kv.format = {})", kFormat);
  const uint64_t version = file.get_uint("kvslim.kv.version");
  if (version != kVersion)
    fail("KV file version {} is not supported (this kvslim reads version {})", version, kVersion);
  const uint64_t fingerprint = file.get_uint("kvslim.kv.model_fingerprint");
  if (fingerprint != expect.model_fingerprint)
    fail("made for another model (fingerprint {:016x}, this model's is {:016x})", fingerprint,
         expect.model_fingerprint);
  Checksum sum;
  for (const gguf::TensorInfo& t : file.tensors()) sum.add(file.tensor_data(t), t.n_bytes);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // The fuzz target (tests/fuzz/fuzz_kv_file.cpp) skips this one check: a mutated file would
  // otherwise never get past it to the structural checks below, which are what it exercises.
  if (sum.h != file.get_uint("kvslim.kv.checksum")) fail("checksum mismatch: the file is corrupt");
#endif
  const uint64_t layers = file.get_uint("kvslim.kv.n_layers"), kv_heads = file.get_uint("kvslim.kv.n_kv_heads"),
                 head_dim = file.get_uint("kvslim.kv.head_dim");
  if (layers != uint64_t(expect.n_layers) || kv_heads != uint64_t(expect.n_kv_heads) ||
      head_dim != uint64_t(expect.head_dim))
    fail("shape {} layers x {} KV heads x {} does not match the model's {} x {} x {}", layers, kv_heads, head_dim,
         expect.n_layers, expect.n_kv_heads, expect.head_dim);

  c.meta.press = file.get_string("kvslim.kv.press");
  c.meta.press_options = file.get_string_array("kvslim.kv.press_options");
  const uint64_t budget = file.get_uint("kvslim.kv.budget");
  if (budget > uint64_t(INT64_MAX)) fail("budget {} is out of range", budget);
  c.meta.budget = budget == 0 ? kNoBudget : int64_t(budget);
  c.meta.turns = int64_t(std::min<uint64_t>(file.get_uint("kvslim.kv.turns"), uint64_t(INT64_MAX)));
  const int n_vocab = expect.n_vocab;
  for (int64_t id : file.get_int_array("kvslim.kv.pending")) {
    if (id < 0 || id >= n_vocab) fail("pending token id {} is outside the vocabulary [0, {})", id, n_vocab);
    c.meta.pending.push_back(int32_t(id));
  }

  c.meta.attachment = file.get_string_opt("kvslim.kv.attachment").value_or("");
  const gguf::TensorInfo* history = file.find_tensor("history");
  if (!history) fail("tensor history is missing");
  c.snapshot.history = read_array<int32_t>(file, "history", kTypeI32, history->n_elements);
  if (c.snapshot.history.empty()) fail("the history is empty");
  for (size_t i = 0; i < c.snapshot.history.size(); ++i)
    if (c.snapshot.history[i] < 0 || c.snapshot.history[i] >= n_vocab)
      fail("history token #{} has id {}, outside the vocabulary [0, {})", i, c.snapshot.history[i], n_vocab);
  const uint64_t n_prompt = file.get_uint("kvslim.kv.prompt_tokens");
  if (n_prompt > c.snapshot.history.size())
    fail("prompt of {} tokens exceeds the history of {}", n_prompt, c.snapshot.history.size());
  c.snapshot.prompt.assign(c.snapshot.history.begin(), c.snapshot.history.begin() + int64_t(n_prompt));
  c.snapshot.last_logits = read_array<float>(file, "last_logits", uint32_t(gguf::TensorType::F32), uint64_t(n_vocab));
  c.snapshot.turns = c.meta.turns;

  const std::vector<int64_t> sizes = file.get_int_array("kvslim.kv.head_sizes");
  if (sizes.size() != layers * kv_heads)
    fail("kvslim.kv.head_sizes has {} entries, expected {}", sizes.size(), layers * kv_heads);
  const int64_t n_history = int64_t(c.snapshot.history.size());
  c.heads.resize(sizes.size());
  for (int l = 0; l < expect.n_layers; ++l)
    for (int h = 0; h < expect.n_kv_heads; ++h) {
      const int64_t n = sizes[size_t(l) * expect.n_kv_heads + h];
      if (n < 0 || n > n_history) fail("head {}.{} holds {} tokens of a history of {}", l, h, n, n_history);
      if (n > expect.context) fail("head {}.{} holds {} tokens, more than --ctx {}", l, h, n, expect.context);
      KvFileHead& head = c.heads[size_t(l) * expect.n_kv_heads + h];
      if (n == 0) continue;
      std::tie(head.key_type, head.keys) = read_rows(file, head_name(l, h, "k"), n, head_dim);
      std::tie(head.value_type, head.values) = read_rows(file, head_name(l, h, "v"), n, head_dim);
      head.positions = read_array<int64_t>(file, head_name(l, h, "pos"), kTypeI64, uint64_t(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = head.positions[size_t(i)];
        if (p < 0 || p >= n_history || (i > 0 && p <= head.positions[size_t(i) - 1]))
          fail("head {}.{}: position {} at index {} is not ascending within the history of {}", l, h, p, i, n_history);
      }
    }

  // Press state: every tensor named press.f32.NAME / press.i64.NAME.
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.rfind("press.f32.", 0) == 0)
      c.press_state.f32[t.name.substr(10)] =
          read_array<float>(file, t.name, uint32_t(gguf::TensorType::F32), t.n_elements);
    else if (t.name.rfind("press.i64.", 0) == 0)
      c.press_state.i64[t.name.substr(10)] = read_array<int64_t>(file, t.name, kTypeI64, t.n_elements);
  }
  return c;
}

}  // namespace kvslim
