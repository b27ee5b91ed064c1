// Kept sets of every registered method on a fixed prompt, compared with a golden file: a
// refactor of the shared press machinery (score → select → keep, block-wise eviction, sparse
// selection) must leave every method's choices bit-identical. For each method (with its default
// options, and again with prefill=block where it has that option) the file holds the positions
// each (layer, KV head) keeps after prefill, the positions each decode step's sparse attention
// reads (decode-time methods), and what each head holds after the last decode step.
//
// The golden file was written by this test on the code before the refactor it guards:
//   KVSLIM_UPDATE_GOLDEN=1 build/kvslim_tests --gtest_filter='PressKeptGolden*'
// Regenerate it only for a change meant to alter some method's choices, and say so in the commit.
// The forward pass is deterministic for a fixed thread count and instruction set: the pool is
// pinned to 2 threads and decode tokens are fixed (not sampled), so no argmax feeds back.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"

namespace kvslim {
namespace {

// Long enough for every method's defaults to act (SnapKV's 32-token window below the budget,
// LagKV's 128-token partitions, Quest's 16-token pages), several prefill blocks.
constexpr int kPrompt = 300, kBudget = 64, kDecode = 6, kBatch = 64, kThreads = 2;
const char* const kGoldenPath = KVSLIM_SOURCE_DIR "/tests/data/press_kept_sets.txt";

// Ascending positions as runs ("0-3 7 9-12"), so that the file stays short and readable.
std::string runs(const std::vector<int64_t>& positions) {
  std::string out;
  for (size_t i = 0; i < positions.size();) {
    size_t j = i;
    while (j + 1 < positions.size() && positions[j + 1] == positions[j] + 1) ++j;
    out += j == i ? fmt::format(" {}", positions[i]) : fmt::format(" {}-{}", positions[i], positions[j]);
    i = j + 1;
  }
  return out;
}

// Records the positions a method's sparse selector picks at each decode step, then lets the
// step use that choice (the selector's own decision is not altered).
class RecordingSelector final : public SparseSelector {
 public:
  RecordingSelector(SparseSelector& inner, std::vector<std::string>& lines) : inner_(inner), lines_(lines) {}
  void start_step(int step) { step_ = step; }

  bool select(int layer, const float* q, const PagedKvCache& cache, std::vector<std::vector<int32_t>>& selected,
              ThreadPool& pool) override {
    const bool sparse = inner_.select(layer, q, cache, selected, pool);
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      std::vector<int64_t> positions;
      if (sparse)
        for (const int32_t i : selected[size_t(h)]) positions.push_back(cache.head(layer, h).position(i));
      lines_.push_back(fmt::format("decode{} sparse L{} H{}:{}", step_, layer, h, sparse ? runs(positions) : " dense"));
    }
    return sparse;
  }

 private:
  SparseSelector& inner_;
  std::vector<std::string>& lines_;
  int step_ = 0;
};

void add_kept(const std::string& label, const PagedKvCache& cache, std::vector<std::string>& lines) {
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      const HeadCache& head = cache.head(l, h);
      std::vector<int64_t> positions;
      for (int64_t i = 0; i < head.size(); ++i) positions.push_back(head.position(i));
      lines.push_back(fmt::format("{} L{} H{}:{}", label, l, h, runs(positions)));
    }
}

// One method's block of the golden file.
std::vector<std::string> run_method(const Model& model, const std::string& method, std::vector<std::string> options) {
  std::vector<std::string> lines{fmt::format("method {} {}", method, fmt::join(options, " "))};
  if (method == "lookaheadkv") options.push_back("adapter=" + testing::random_adapter_path(model));
  ThreadPool pool(kThreads);
  EngineOptions engine;
  engine.batch = kBatch;
  engine.page_tokens = 8;
  const auto press = make_press(method, options);
  std::vector<int32_t> prompt(kPrompt);
  const int n_vocab = model.config().n_vocab;
  for (int i = 0; i < kPrompt; ++i) prompt[size_t(i)] = 3 + (i * 37 + 11) % (n_vocab - 3);
  Session session(model, pool,
                  {.engine = engine,
                   .capacity = kPrompt + kDecode,
                   .press = press.get(),
                   .budget = kBudget,
                   .n_predict = kDecode,
                   .seed = 5});
  session.prefill(prompt);
  add_kept("prefill", session.kv(), lines);
  std::unique_ptr<RecordingSelector> recorder;
  if (SparseSelector* selector = press->sparse_selector()) {
    recorder = std::make_unique<RecordingSelector>(*selector, lines);
    session.mutable_kv().set_sparse_selector(recorder.get());
  }
  for (int step = 0; step < kDecode; ++step) {
    if (recorder) recorder->start_step(step);
    session.decode(int32_t(3 + (step * 29 + 5) % (n_vocab - 3)));
  }
  add_kept("final", session.kv(), lines);
  return lines;
}

std::vector<std::string> current_lines() {
  testing::TinyModel m;
  m.layers = 3;
  m.heads = 4;
  m.kv_heads = 2;
  const auto model = Model::load(testing::make_model(m));
  std::vector<std::string> lines;
  for (const auto& info : press_registry()) {
    auto block = run_method(*model, info.name, {});
    lines.insert(lines.end(), block.begin(), block.end());
    for (const auto& option : info.options)
      if (option.key == "prefill") {
        block = run_method(*model, info.name, {"prefill=block"});
        lines.insert(lines.end(), block.begin(), block.end());
      }
  }
  return lines;
}

TEST(PressKeptGolden, EveryMethodKeepsWhatTheGoldenFileSays) {
  const auto lines = current_lines();
  if (const char* update = std::getenv("KVSLIM_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    const std::string tmp = std::string(kGoldenPath) + ".tmp";
    {
      std::ofstream out(tmp);
      for (const auto& line : lines) out << line << '\n';
      ASSERT_TRUE(out.good()) << "cannot write " << tmp;
    }
    std::filesystem::rename(tmp, kGoldenPath);
    GTEST_SKIP() << "wrote " << kGoldenPath << " (" << lines.size() << " lines)";
  }
  std::ifstream in(kGoldenPath);
  ASSERT_TRUE(in) << "cannot read " << kGoldenPath << "; write it with KVSLIM_UPDATE_GOLDEN=1";
  std::vector<std::string> golden;
  for (std::string line; std::getline(in, line);) golden.push_back(line);
  std::string method;
  for (size_t i = 0; i < std::max(lines.size(), golden.size()); ++i) {
    const std::string now = i < lines.size() ? lines[i] : "(nothing)";
    const std::string then = i < golden.size() ? golden[i] : "(nothing)";
    if (now.rfind("method ", 0) == 0) method = now;
    ASSERT_EQ(now, then) << "line " << i + 1 << " of " << kGoldenPath << " (" << method << ")";
  }
}

// The file is not vacuous: every registered method has a block, and the eviction methods did
// evict (some head keeps fewer than the prompt's tokens after prefill).
TEST(PressKeptGolden, GoldenFileCoversEveryMethod) {
  std::ifstream in(kGoldenPath);
  ASSERT_TRUE(in) << kGoldenPath;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& info : press_registry())
    EXPECT_NE(text.find("method " + info.name + " "), std::string::npos) << info.name << " has no golden block";
  // Heads that hold the whole prompt after prefill are written as the single run "0-299".
  const std::string whole = fmt::format(": 0-{}", kPrompt - 1);
  size_t heads = 0, evicted = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("prefill ", 0) == 0) {
      ++heads;
      if (line.find(whole) == std::string::npos) ++evicted;
    }
  EXPECT_GT(evicted, heads / 2) << "most methods evict at prefill, so most heads must have evicted";
}

}  // namespace
}  // namespace kvslim
