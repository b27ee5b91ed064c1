// `kvslim serve --prefill-evict block` reaches the engine: a request with a method that has
// block-wise eviction holds at most budget + one block per head while its prompt runs (its KV
// peak is far below the same request evicting at the end), and a request choosing a method
// without it (full) is served, evicting nothing, rather than refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_helpers.h"

namespace kvslim {
namespace {

using nlohmann::json;
using testing::ServerProcess;

TEST(ServerPrefillEvict, BlockEvictionBoundsThePromptsPeak) {
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += fmt::format(" w{}", i % 10);
  auto peak = [&](const std::string& args, const std::string& press) {
    ServerProcess server("--parallel 1 --ctx 1024 --kv-page 16 --batch 64 --press snapkv --budget 64 " + args);
    auto [status, out] =
        server.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 2}, {"press", press}}.dump());
    EXPECT_EQ(status, 200) << out;
    EXPECT_GT(out["usage"]["prompt_tokens"].get<int>(), 300);
    return out["kv"];
  };
  const json block = peak("--prefill-evict block", "snapkv");
  const json end = peak("", "snapkv");
  EXPECT_EQ(block["kept_tokens"], 64);
  EXPECT_EQ(end["kept_tokens"], 64);
  // Pages of 16 tokens: block-wise a head peaks at 64 + 64 tokens (+ a decode page), at the end
  // at the whole prompt (> 300 tokens).
  EXPECT_LT(2 * block["bytes_peak"].get<uint64_t>(), end["bytes_peak"].get<uint64_t>()) << block << end;
  const json full = peak("--prefill-evict block", "full");
  EXPECT_GT(full["kept_tokens"].get<double>(), 300);
}

TEST(ServerPrefillEvict, SavedSlotRestoresBlockWise) {
  const std::string dir = testing::temp_path("prefill-evict-slots");
  std::filesystem::create_directories(dir);
  ServerProcess server(
      "--parallel 1 --ctx 1024 --kv-page 16 --batch 64 --press snapkv --budget 64 "
      "--prefill-evict block --slot-save-path " +
      dir);
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += fmt::format(" w{}", i % 10);
  auto [s1, first] = server.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 2}}.dump());
  ASSERT_EQ(s1, 200) << first;
  ASSERT_EQ(server.post("/slots/0?action=save", json{{"filename", "b.kv"}}.dump()).first, 200);
  ASSERT_EQ(server.post("/slots/0?action=erase", "{}").first, 200);
  auto [rs, restored] = server.post("/slots/0?action=restore", json{{"filename", "b.kv"}}.dump());
  ASSERT_EQ(rs, 200) << restored;
  // The next turn (300 more tokens) continues the restored slot, evicting after every block: the
  // slot's peak stays at budget + block per head (as the first turn's), far below 64 + 300.
  std::string more = prompt + first["choices"][0]["text"].get<std::string>();
  for (int i = 0; i < 150; ++i) more += fmt::format(" v{}", i % 10);
  auto [s2, second] = server.post("/v1/completions", json{{"prompt", more}, {"max_tokens", 2}}.dump());
  ASSERT_EQ(s2, 200) << second;
  EXPECT_GE(second["timings"]["cache_n"].get<int>(), first["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(second["kv"]["kept_tokens"], 64);
  EXPECT_LE(second["kv"]["bytes_peak"].get<uint64_t>(), first["kv"]["bytes_peak"].get<uint64_t>()) << first << second;
}

}  // namespace
}  // namespace kvslim
