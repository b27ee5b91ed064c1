#include "engine/kv_file.h"

#include <fmt/format.h>

#include <cstring>
#include <tuple>
#include <utility>

#include "gguf/gguf.h"
#include "model/fingerprint.h"
#include "util/error.h"

namespace kvslim {

namespace {

constexpr const char* kFormat = "kvslim-kv";
constexpr uint32_t kVersion = 1;
constexpr uint32_t kTypeI32 = 26, kTypeI64 = 27;  // ggml tensor type ids

// FNV-1a 64 over every tensor's bytes in file order: a flipped bit in the K/V data (which no
// structural check can see) is refused too.
struct Checksum {
  uint64_t h = 1469598103934665603ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

std::string head_name(int layer, int kv_head, const char* part) { return fmt::format("kv.{}.{}.{}", layer, kv_head, part); }

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The one place that reads cached rows for a file: K and V of every kept token in the types
// the pages store them (no conversion, so saving never loses precision; each tensor is tagged
// with its type).
void head_rows(const HeadCache& head, const PagePool& pool, KvFileHead& rows) {
  const int64_t n = head.size();
  rows.key_type = pool.key_type();
  rows.value_type = pool.value_type();
  const size_t kb = pool.key_row_bytes(), vb = pool.value_row_bytes();
  rows.keys.resize(size_t(n) * kb);
  rows.values.resize(size_t(n) * vb);
  rows.positions.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(&rows.keys[size_t(i) * kb], head.key_data(i), kb);
    std::memcpy(&rows.values[size_t(i) * vb], head.value_data(i), vb);
    rows.positions[size_t(i)] = head.position(i);
  }
}

// ... and the one place that writes them back: rows of the pool's types are copied as they
// are; a file saved with other page types (--cache-type-k/-v changed) converts through f32.
void append_rows(const KvFileHead& rows, int head_dim, HeadCache& head, PagePool& pool) {
  const size_t kb = row_bytes(rows.key_type, head_dim), vb = row_bytes(rows.value_type, head_dim);
  if (rows.key_type == pool.key_type() && rows.value_type == pool.value_type()) {
    for (size_t i = 0; i < rows.positions.size(); ++i)
      head.append_stored(&rows.keys[i * kb], &rows.values[i * vb], rows.positions[i], pool);
    return;
  }
  std::vector<float> key(static_cast<size_t>(head_dim)), value(static_cast<size_t>(head_dim));
  for (size_t i = 0; i < rows.positions.size(); ++i) {
    convert_to_f32(rows.key_type, &rows.keys[i * kb], key.data(), head_dim);
    convert_to_f32(rows.value_type, &rows.values[i * vb], value.data(), head_dim);
    head.append(key.data(), value.data(), rows.positions[i], pool);
  }
}

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
    fail("tensor {} has element type {}, expected {}", name, gguf::tensor_type_name(t->type), gguf::tensor_type_name(type));
  if (t->n_elements != n_elements) fail("tensor {} has {} elements, expected {}", name, t->n_elements, n_elements);
  return file.tensor_data(*t);
}

template <class T>
std::vector<T> read_array(const gguf::File& file, const std::string& name, uint32_t type, uint64_t n) {
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), tensor(file, name, type, n), n * sizeof(T));
  return v;
}

KvFileContents read_contents(const gguf::File& file, const Model& model, const EngineOptions& options) {
  KvFileContents c;
  if (file.get_string_opt("kvslim.kv.format") != std::string(kFormat))
    fail("not a kvslim KV file (no kvslim.kv.format = {})", kFormat);
  const uint64_t version = file.get_uint("kvslim.kv.version");
  if (version != kVersion) fail("KV file version {} is not supported (this kvslim reads version {})", version, kVersion);
  const uint64_t fingerprint = file.get_uint("kvslim.kv.model_fingerprint");
  if (fingerprint != model_fingerprint(model))
    fail("made for another model (fingerprint {:016x}, this model's is {:016x})", fingerprint, model_fingerprint(model));
  Checksum sum;
  for (const gguf::TensorInfo& t : file.tensors()) sum.add(file.tensor_data(t), t.n_bytes);
  if (sum.h != file.get_uint("kvslim.kv.checksum")) fail("checksum mismatch: the file is corrupt");
  const ModelConfig& config = model.config();
  const uint64_t layers = file.get_uint("kvslim.kv.n_layers"), kv_heads = file.get_uint("kvslim.kv.n_kv_heads"),
                 head_dim = file.get_uint("kvslim.kv.head_dim");
  if (layers != uint64_t(config.n_layers) || kv_heads != uint64_t(config.n_kv_heads) ||
      head_dim != uint64_t(config.head_dim))
    fail("shape {} layers x {} KV heads x {} does not match the model's {} x {} x {}", layers, kv_heads, head_dim,
         config.n_layers, config.n_kv_heads, config.head_dim);

  c.meta.press = file.get_string("kvslim.kv.press");
  c.meta.press_options = file.get_string_array("kvslim.kv.press_options");
  const uint64_t budget = file.get_uint("kvslim.kv.budget");
  if (budget > uint64_t(INT64_MAX)) fail("budget {} is out of range", budget);
  c.meta.budget = budget == 0 ? kNoBudget : int64_t(budget);
  c.meta.turns = int64_t(std::min<uint64_t>(file.get_uint("kvslim.kv.turns"), uint64_t(INT64_MAX)));
  const int n_vocab = config.n_vocab;
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
  if (n_prompt > c.snapshot.history.size()) fail("prompt of {} tokens exceeds the history of {}", n_prompt, c.snapshot.history.size());
  c.snapshot.prompt.assign(c.snapshot.history.begin(), c.snapshot.history.begin() + int64_t(n_prompt));
  c.snapshot.last_logits = read_array<float>(file, "last_logits", uint32_t(gguf::TensorType::F32), uint64_t(n_vocab));
  c.snapshot.turns = c.meta.turns;

  const std::vector<int64_t> sizes = file.get_int_array("kvslim.kv.head_sizes");
  if (sizes.size() != layers * kv_heads) fail("kvslim.kv.head_sizes has {} entries, expected {}", sizes.size(), layers * kv_heads);
  const int64_t n_history = int64_t(c.snapshot.history.size());
  c.heads.resize(sizes.size());
  for (int l = 0; l < config.n_layers; ++l)
    for (int h = 0; h < config.n_kv_heads; ++h) {
      const int64_t n = sizes[size_t(l) * config.n_kv_heads + h];
      if (n < 0 || n > n_history) fail("head {}.{} holds {} tokens of a history of {}", l, h, n, n_history);
      if (n > options.context) fail("head {}.{} holds {} tokens, more than --ctx {}", l, h, n, options.context);
      KvFileHead& head = c.heads[size_t(l) * config.n_kv_heads + h];
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
      c.press_state.f32[t.name.substr(10)] = read_array<float>(file, t.name, uint32_t(gguf::TensorType::F32), t.n_elements);
    else if (t.name.rfind("press.i64.", 0) == 0)
      c.press_state.i64[t.name.substr(10)] = read_array<int64_t>(file, t.name, kTypeI64, t.n_elements);
  }
  return c;
}

}  // namespace

void write_kv_file(const std::string& path, const Session& session, const KvFileMeta& meta, const Model& model) {
  const PagedKvCache& kv = session.kv();
  const Session::Snapshot snap = session.snapshot();
  if (snap.history.empty()) fail("nothing to save: the session has no turn yet");
  gguf::Writer w;
  Checksum sum;
  auto add = [&](std::string name, uint32_t type, std::vector<uint64_t> dims, std::vector<uint8_t> bytes) {
    sum.add(bytes.data(), bytes.size());
    w.add_tensor(std::move(name), type, std::move(dims), std::move(bytes));
  };
  w.set("general.architecture", gguf::Value::of_string("kvslim-kv"));
  w.set("kvslim.kv.format", gguf::Value::of_string(kFormat));
  w.set("kvslim.kv.version", gguf::Value::of_u32(kVersion));
  w.set("kvslim.kv.model_fingerprint", gguf::Value::of_u64(model_fingerprint(model)));
  w.set("kvslim.kv.n_layers", gguf::Value::of_u32(uint32_t(kv.n_layers())));
  w.set("kvslim.kv.n_kv_heads", gguf::Value::of_u32(uint32_t(kv.n_kv_heads())));
  w.set("kvslim.kv.head_dim", gguf::Value::of_u32(uint32_t(kv.head_dim())));
  w.set("kvslim.kv.press", gguf::Value::of_string(meta.press));
  w.set("kvslim.kv.press_options", gguf::Value::of_string_array(meta.press_options));
  w.set("kvslim.kv.budget", gguf::Value::of_u64(meta.budget == kNoBudget ? 0 : uint64_t(meta.budget)));
  w.set("kvslim.kv.turns", gguf::Value::of_u64(uint64_t(meta.turns)));
  w.set("kvslim.kv.pending", gguf::Value::of_i32_array(meta.pending));
  if (!meta.attachment.empty()) w.set("kvslim.kv.attachment", gguf::Value::of_string(meta.attachment));
  w.set("kvslim.kv.prompt_tokens", gguf::Value::of_u64(snap.prompt.size()));
  add("history", kTypeI32, {snap.history.size()}, bytes_of(snap.history));
  add("last_logits", uint32_t(gguf::TensorType::F32), {snap.last_logits.size()}, bytes_of(snap.last_logits));

  std::vector<int32_t> sizes;
  KvFileHead rows;
  const int d = kv.head_dim();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      head_rows(kv.head(l, h), kv.pool(), rows);
      sizes.push_back(int32_t(rows.positions.size()));
      if (rows.positions.empty()) continue;
      const uint64_t n = rows.positions.size();
      add(head_name(l, h, "k"), ggml_type_id(rows.key_type), {uint64_t(d), n}, std::move(rows.keys));
      add(head_name(l, h, "v"), ggml_type_id(rows.value_type), {uint64_t(d), n}, std::move(rows.values));
      add(head_name(l, h, "pos"), kTypeI64, {n}, bytes_of(rows.positions));
    }
  w.set("kvslim.kv.head_sizes", gguf::Value::of_i32_array(sizes));

  PressState state;
  if (session.press()) session.press()->save_state(state);
  for (const auto& [name, v] : state.f32)
    if (!v.empty()) add("press.f32." + name, uint32_t(gguf::TensorType::F32), {v.size()}, bytes_of(v));
  for (const auto& [name, v] : state.i64)
    if (!v.empty()) add("press.i64." + name, kTypeI64, {v.size()}, bytes_of(v));
  w.set("kvslim.kv.checksum", gguf::Value::of_u64(sum.h));
  w.write(path);
}

KvFileContents read_kv_file(const std::string& path, const Model& model, const EngineOptions& options) {
  try {
    const gguf::File file = gguf::File::open(path);
    return read_contents(file, model, options);
  } catch (const Error& e) {
    const std::string what = e.what();
    // The GGUF reader's messages already start with the path.
    if (what.rfind(path, 0) == 0) fail("cannot load KV file {}", what);
    fail("cannot load KV file {}: {}", path, what);
  }
}

void apply_kv_file(const KvFileContents& contents, Session& session) {
  PagedKvCache& kv = session.mutable_kv();
  if (kv.total_tokens() != 0 || !session.history().empty()) fail("a KV file loads into a fresh session only");
  const int d = kv.head_dim();
  for (int l = 0; l < kv.n_layers(); ++l)
    for (int h = 0; h < kv.n_kv_heads(); ++h)
      append_rows(contents.heads[size_t(l) * kv.n_kv_heads() + h], d, kv.head(l, h), kv.pool());
  session.restore(contents.snapshot);
  session.load_press_state(contents.press_state);
}

}  // namespace kvslim
