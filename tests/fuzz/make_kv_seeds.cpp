// Writes the seed corpus of the KV-file fuzz target (tests/fuzz/corpus_kv_file): a few valid KV
// files of the tests' tiny model (2 layers, 2 KV heads, head_dim 16, the byte vocabulary), made
// the way `generate --save-kv` and `chat` make them: full and evicting methods, f32, f16 and bf16
// pages, a method that saves its state (H2O), several turns, a pending token and an attachment.
//   cmake --build build --target kvslim_make_kv_seeds && build/kvslim_make_kv_seeds tests/fuzz/corpus_kv_file
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "../test_models.h"
#include "engine/live_session.h"
#include "kv_file_input.h"
#include "util/thread_pool.h"

namespace {

using namespace kvslim;

struct Seed {
  const char* name;
  const char* press;
  std::vector<std::string> options;
  std::optional<int64_t> budget;
  DType pages;
  int turns;
  bool attachment;
};

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t{1};  // BOS
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 37 + salt * 11) % 256);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  const Model& model = testing::loaded_tiny_model();
  const ModelConfig& c = model.config();
  // The fuzz target expects exactly this shape (tests/fuzz/kv_file_input.h).
  if (c.n_layers != fuzz::kKvLayers || c.n_kv_heads != fuzz::kKvHeads || c.head_dim != fuzz::kKvHeadDim ||
      c.n_vocab != fuzz::kKvVocab) {
    fmt::print(stderr, "the tiny model's shape changed: update kKvLayers..kKvVocab in kv_file_input.h\n");
    return 1;
  }
  ThreadPool pool(1);
  const Seed seeds[] = {
      {"full_f16", "full", {}, std::nullopt, DType::F16, 1, false},
      {"snapkv_f32", "snapkv", {"window=2"}, 6, DType::F32, 1, false},
      {"h2o_state_bf16", "h2o", {}, 8, DType::BF16, 2, false},
      {"streaming_chat", "streaming_llm", {"sinks=2"}, 10, DType::F16, 3, true},
  };
  for (const Seed& s : seeds) {
    EngineOptions engine;
    engine.context = int(fuzz::kKvContext);
    engine.batch = 8;
    engine.cache_type_k = engine.cache_type_v = s.pages;
    CompressionOptions compression;
    compression.press = s.press;
    compression.press_options = s.options;
    compression.budget = s.budget;
    SamplerParams sampling;
    sampling.temperature = 0;
    LiveSession live(model, pool, engine, compression, sampling);
    std::vector<int32_t> conversation;
    for (int turn = 0; turn < s.turns; ++turn) {
      const std::vector<int32_t> more = tokens(12 + 5 * turn, turn);
      conversation.insert(conversation.end(), more.begin() + (turn ? 1 : 0), more.end());
      live.prompt(conversation, 3);
      const Answer a = live.answer(3);
      conversation.insert(conversation.end(), a.tokens.begin(), a.tokens.end());
    }
    if (s.attachment) live.set_attachment(R"([{"role": "user", "content": "hi"}])");
    const std::string path = (out / (std::string(s.name) + ".kv")).string();
    live.save(path);
    fmt::print("{}: {} bytes\n", path, std::filesystem::file_size(path));
  }
  return 0;
}
