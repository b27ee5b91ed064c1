// Compressed-KV files: a session's kept K/V per (layer, KV head) with original positions, its
// token history and last logits, the method (name, options, budget) with the state it needs to
// go on (Press::save_state), and the model fingerprint. A GGUF file (our validated reader and
// atomic writer); the layout is in docs/conversations.md. Every K/V tensor carries its element
// type (the pages' stored type, kept as it is) as its GGUF tensor type, and all reading and
// writing of cached rows goes through head_rows()/append_rows() in kv_file.cpp, so a new KV page
// element type changes one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tensor/dtype.h"

namespace kvslim {

struct KvFileMeta {
  std::string press;
  std::vector<std::string> press_options;
  int64_t budget = kNoBudget;  // stored as 0
  int64_t turns = 0;
  std::vector<int32_t> pending;  // a sampled token not fed yet (LiveSession)
  std::string attachment;        // a layer above's text (chat: its messages as JSON); "" if none
};

// One head's kept tokens, as read from a file: the rows in the element types the saving
// session's pages stored (f32, f16, bf16 or q8_0; keys and values chosen apart).
struct KvFileHead {
  DType key_type = DType::F32, value_type = DType::F32;
  std::vector<uint8_t> keys, values;  // [n] rows of row_bytes(type, head_dim)
  std::vector<int64_t> positions;     // strictly ascending, < history length
};

// A fully read and validated file, not yet applied to any session.
struct KvFileContents {
  KvFileMeta meta;
  std::vector<KvFileHead> heads;  // [layer][kv head]
  Session::Snapshot snapshot;
  PressState press_state;
};

// What a file must match: the model it was made for and its shape, and --ctx.
struct KvFileExpectation {
  uint64_t model_fingerprint = 0;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, n_vocab = 0;
  int64_t context = 0;  // most tokens a head may hold
};

// Writes atomically (temporary file, then rename: an existing file is never half-overwritten).
void write_kv_file(const std::string& path, const Session& session, const KvFileMeta& meta, const Model& model);

// Reads and checks everything (format, model fingerprint and shapes, every count and position,
// token ids in the vocabulary, each head within --ctx); throws kvslim::Error naming the file and
// what is wrong. Nothing outside the returned value is touched.
KvFileContents read_kv_file(const std::string& path, const Model& model, const EngineOptions& options);
// The same checks on an opened file against `expect` (kv_file_read.cpp): read_kv_file's work, and
// what the fuzz target runs. Errors do not name the file.
KvFileContents read_kv_contents(const gguf::File& file, const KvFileExpectation& expect);

// Fills a session that has run no turn (made with the file's method and budget) and loads the
// press's state; throws if the press refuses its state (the session must then be discarded).
void apply_kv_file(const KvFileContents& contents, Session& session);

}  // namespace kvslim
