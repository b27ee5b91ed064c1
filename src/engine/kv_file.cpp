#include "engine/kv_file.h"

#include <fmt/format.h>

#include <cstring>
#include <tuple>
#include <utility>

#include "engine/kv_file_format.h"
#include "gguf/gguf.h"
#include "model/fingerprint.h"
#include "util/error.h"

namespace kvslim {

using namespace kv_file;

namespace {

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
    const ModelConfig& config = model.config();
    return read_kv_contents(file, {.model_fingerprint = model_fingerprint(model),
                                   .n_layers = config.n_layers,
                                   .n_kv_heads = config.n_kv_heads,
                                   .head_dim = config.head_dim,
                                   .n_vocab = config.n_vocab,
                                   .context = options.context});
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
