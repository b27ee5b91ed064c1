// Small models for tests: a tiny SentencePiece-style vocabulary written with our GGUF writer,
// and random-weight models built on it, in a per-process temporary directory.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include <unistd.h>

#include "gguf/gguf.h"
#include "tokenizer/byte_vocab.h"
#include "model/model.h"
#include "model/random_model.h"

namespace kvslim::testing {

// The directory is emptied the first time a process asks for it: CTest runs every test in its own
// process, and a process id reused from an earlier run (CI runs on the machine the tests ran on
// before) must not find that run's files, e.g. a server log naming a port that is gone.
inline std::string temp_path(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("kvslim-tests-" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    return d;
  }();
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The built-in byte vocabulary as a vocab-only GGUF file.
inline std::string tiny_vocab() {
  const std::string path = temp_path("tiny-vocab.gguf");
  if (std::filesystem::exists(path)) return path;
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  add_byte_vocab(w);
  w.write(path);
  return path;
}

struct TinyModel {
  Arch arch = Arch::Llama;
  DType type = DType::F32;
  int layers = 2, dim = 64, heads = 4, kv_heads = 2, ffn = 96;
  bool tied = false;
  bool rope_freqs = false;
  uint64_t seed = 7;
  int window = 0, swa_period = 6;     // gemma3's sliding window and layer pattern (gpt-oss: window only)
  int experts = 8, experts_used = 2;  // qwen3moe and gpt-oss only
};

inline std::string make_model(const TinyModel& m) {
  const std::string path = temp_path(fmt::format(
      "model-{}-{}-{}-{}-{}-{}-{}-{}-{}-{}-{}-{}-{}-{}.gguf", arch_name(m.arch), dtype_name(m.type), m.layers, m.dim,
      m.heads, m.kv_heads, m.ffn, m.tied, m.rope_freqs, m.seed, m.window, m.swa_period, m.experts, m.experts_used));
  if (std::filesystem::exists(path)) return path;
  RandomModelSpec spec;
  spec.config.arch = m.arch;
  if (m.arch == Arch::Qwen3Moe || m.arch == Arch::GptOss) {
    spec.config.moe.n_experts = m.experts;
    spec.config.moe.n_experts_used = m.experts_used;
  }
  spec.config.n_layers = m.layers;
  spec.config.dim = m.dim;
  spec.config.n_heads = m.heads;
  spec.config.n_kv_heads = m.kv_heads;
  spec.config.ffn_dim = m.ffn;
  spec.config.context_length = 512;
  spec.type = m.type;
  spec.tied_output = m.tied;
  spec.rope_freqs = m.rope_freqs;
  spec.seed = m.seed;
  spec.sliding_window = m.window;
  spec.swa_period = m.swa_period;
  write_random_model(spec, tiny_vocab(), path);
  return path;
}

// The default TinyModel (2 layers, dim 64, 4 query / 2 KV heads), loaded once per test binary.
inline const Model& loaded_tiny_model() {
  static const std::unique_ptr<Model> model = Model::load(make_model(TinyModel{}));
  return *model;
}

}  // namespace kvslim::testing
