// The seed corpora of the chat-template and KV-file fuzz targets (tests/fuzz), replayed in the
// ordinary build: the seeds meant to be valid render or load (so the fuzzers start from inputs
// that reach deep into the code, and a change of format shows here first), the ones meant to be
// refused are refused with kvslim::Error, and the KV seeds are valid files of the tests' tiny
// model for the real reader, checksum included.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/kv_file.h"
#include "engine/live_session.h"
#include "fuzz/chat_template_input.h"
#include "fuzz/kv_file_input.h"
#include "test_models.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

const std::filesystem::path kFuzzDir = std::filesystem::path(KVSLIM_SOURCE_DIR) / "tests/fuzz";

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpora, ChatTemplateSeedsRenderOrAreRefusedAsMeant) {
  // Seeds that must fail: a syntax error, a template whose raise_exception the conversation
  // triggers (two user turns in a row), and a conversation with a number too large for a double
  // (the fuzzer found it escaping as nlohmann's out_of_range).
  const std::set<std::string> refused = {"syntax_error.txt", "llama_like.txt", "number_overflow.txt"};
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kFuzzDir / "corpus_chat_template")) {
    ++files;
    const std::string name = entry.path().filename().string();
    const std::string input = read_all(entry.path());
    if (refused.count(name)) {
      EXPECT_THROW(fuzz::render_fuzz_input(input), Error) << name;
      continue;
    }
    std::string out;
    try {
      out = fuzz::render_fuzz_input(input);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
    EXPECT_FALSE(out.empty()) << name;
  }
  EXPECT_GE(files, 5);
  // One seed's whole output, written out by hand from the template (chatml.txt: the system
  // message taken out of the loop, contents trimmed, the generation prompt).
  EXPECT_EQ(fuzz::render_fuzz_input(read_all(kFuzzDir / "corpus_chat_template/chatml.txt")),
            "<|im_start|>system\nAnswer in one word.<|im_end|>\n"
            "<|im_start|>user\nColour of the sky?<|im_end|>\n"
            "<|im_start|>assistant\nBlue<|im_end|>\n"
            "<|im_start|>user\nAnd grass?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(FuzzCorpora, KvFileSeedsAreValidFilesOfTheTinyModel) {
  const Model& model = testing::loaded_tiny_model();
  ThreadPool pool(1);
  EngineOptions engine;
  engine.context = int(fuzz::kKvContext);
  int files = 0;
  std::set<std::string> presses;
  bool state = false, attachment = false;
  for (const auto& entry : std::filesystem::directory_iterator(kFuzzDir / "corpus_kv_file")) {
    ++files;
    const std::string path = entry.path().string();
    const std::string bytes = read_all(entry.path());
    // What the fuzz target reads (no checksum, the file's own fingerprint) keeps its promises...
    const KvFileContents c = fuzz::read_fuzz_kv(std::vector<uint8_t>(bytes.begin(), bytes.end()));
    EXPECT_EQ(fuzz::broken_promise(c), nullptr) << path;
    // ... and the real reader loads the file into a session of the model it was made for.
    SamplerParams sampling;
    sampling.temperature = 0;
    try {
      const auto live = LiveSession::load(path, model, pool, engine, sampling);
      presses.insert(live->compression().press);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << " (regenerate: build/kvslim_make_kv_seeds tests/fuzz/corpus_kv_file)";
    }
    state = state || !c.press_state.f32.empty() || !c.press_state.i64.empty();
    attachment = attachment || !c.meta.attachment.empty();
  }
  EXPECT_GE(files, 4);
  EXPECT_GE(presses.size(), 3u);
  EXPECT_TRUE(state) << "no seed carries a method's state";
  EXPECT_TRUE(attachment) << "no seed carries an attachment";
}

}  // namespace
}  // namespace kvslim
