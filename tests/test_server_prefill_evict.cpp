// `kvslim serve --prefill-evict block` reaches the engine: a request with a method that has
// block-wise eviction holds at most budget + one block per head while its prompt runs (its KV
// peak is far below the same request evicting at the end), and a request choosing a method
// without it (full) is served, evicting nothing, rather than refused.
#include <gtest/gtest.h>

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
    auto [status, out] = server.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 2}, {"press", press}}.dump());
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

}  // namespace
}  // namespace kvslim
