// Perplexity: against an independent computation (each chunk run one token at a time through a
// fresh cache, plain log-softmax over the logits), the chunking rules, and with a press.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_helpers.h"
#include "eval/perplexity.h"
#include "kv/paged_cache.h"
#include "press/registry.h"
#include "model/forward.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::unique_ptr<Model> tiny() {
  testing::TinyModel m;
  return Model::load(testing::make_model(m));
}

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on mat number " + std::to_string(i * 7 % 13) + ". ";
  return text;
}

// Expected perplexity, computed without perplexity.cpp: a decode loop per chunk and a naive
// log-softmax in long double.
double reference_ppl(const Model& model, const std::vector<int32_t>& tokens, int ctx, int n_chunks, ThreadPool& pool) {
  const int n_vocab = model.config().n_vocab;
  long double nll = 0;
  int64_t count = 0;
  for (int c = 0; c < n_chunks; ++c) {
    PagedKvCache cache(kv_shape(model.config()), ctx);  // f32 pages
    Forward forward(model, 1);
    for (int p = 0; p + 1 < ctx; ++p) {
      const int32_t token = p == 0 ? model.tokenizer().bos_id() : tokens[size_t(c) * ctx + p];
      const float* logits = forward.run(&token, 1, p, cache, pool);
      if (p < ctx / 2) continue;
      long double z = 0;
      for (int v = 0; v < n_vocab; ++v) z += std::exp((long double)logits[v]);
      nll += std::log(z) - (long double)logits[tokens[size_t(c) * ctx + p + 1]];
      ++count;
    }
  }
  return double(std::exp(nll / count));
}

TEST(Perplexity, MatchesATokenByTokenReference) {
  const auto model = tiny();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = eval::perplexity_tokens(*model, sample_text());
  ASSERT_EQ(tokens[0], model->tokenizer().bos_id());
  eval::PerplexityOptions options;
  options.cache_type_k = options.cache_type_v = DType::F32;  // as the reference
  options.ctx = 64;
  options.batch = 24;  // blocks that do not divide the chunk
  const eval::PerplexityResult r = eval::perplexity(*model, pool, tokens, options);
  const int n_chunks = int(tokens.size() / 64);
  ASSERT_EQ(int(r.chunks.size()), n_chunks);
  EXPECT_EQ(r.tokens_scored, int64_t(n_chunks) * 31);  // ctx - ctx/2 - 1 per chunk
  EXPECT_EQ(r.tokens_total, int64_t(tokens.size()));
  const double expected = reference_ppl(*model, tokens, 64, n_chunks, pool);
  EXPECT_NEAR(r.ppl, expected, 1e-4 * expected);
  EXPECT_NEAR(r.chunks.back().cumulative_ppl, r.ppl, 1e-9 * r.ppl);
  // The mean of the per-chunk nll gives the total (every chunk scores as many tokens).
  double sum = 0;
  for (const auto& c : r.chunks) sum += c.nll;
  EXPECT_NEAR(std::exp(sum / double(r.tokens_scored)), r.ppl, 1e-9 * r.ppl);
  EXPECT_GT(r.ppl_error, 0);

  options.chunks = 2;
  const eval::PerplexityResult two = eval::perplexity(*model, pool, tokens, options);
  EXPECT_EQ(two.chunks.size(), 2u);
  EXPECT_NEAR(two.ppl, reference_ppl(*model, tokens, 64, 2, pool), 1e-4 * two.ppl);
}

TEST(Perplexity, TokenNllIsTheNegativeLogSoftmax) {
  const float logits[3] = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(eval::token_nll(logits, 3, 0), std::log(z) - 1.0, 1e-12);
  EXPECT_NEAR(eval::token_nll(logits, 3, 2), std::log(z) - 3.0, 1e-12);
}

TEST(Perplexity, WithAPress) {
  const auto model = tiny();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = eval::perplexity_tokens(*model, sample_text());
  eval::PerplexityOptions options;
  options.ctx = 64;
  options.chunks = 3;
  const double plain = eval::perplexity(*model, pool, tokens, options).ppl;

  // A budget that holds the whole first half evicts nothing: the same number through the
  // Session path (prefill, then extend with every token's logits).
  options.compression.press = "snapkv";
  options.compression.press_options = {"window=4"};
  options.compression.budget = 32;
  const eval::PerplexityResult kept_all = eval::perplexity(*model, pool, tokens, options);
  EXPECT_NEAR(kept_all.ppl, plain, 1e-4 * plain);
  EXPECT_DOUBLE_EQ(kept_all.chunks[0].kept_tokens, 32.0);

  // A small budget keeps 8 tokens per head and changes the scored tokens' context.
  options.compression.budget = 8;
  const eval::PerplexityResult pressed = eval::perplexity(*model, pool, tokens, options);
  EXPECT_DOUBLE_EQ(pressed.chunks[0].kept_tokens, 8.0);
  EXPECT_EQ(pressed.tokens_scored, kept_all.tokens_scored);
  EXPECT_TRUE(std::isfinite(pressed.ppl));
  EXPECT_GT(std::abs(pressed.ppl - plain), 1e-6 * plain);

  // Independent check of the pressed number for one chunk: a Session compressing the first half,
  // then the second half decoded one token at a time with a plain log-softmax.
  options.chunks = 1;
  const eval::PerplexityResult one = eval::perplexity(*model, pool, tokens, options);
  const std::unique_ptr<Press> press = make_press("snapkv", {"window=4"});
  EngineOptions engine;
  engine.context = 64;
  Session session(*model, pool, {.engine = engine, .capacity = 64, .press = press.get(), .budget = 8, .n_predict = 32});
  std::vector<int32_t> half(tokens.begin(), tokens.begin() + 32);
  session.prefill(half);
  long double nll = 0;
  const int n_vocab = model->config().n_vocab;
  // extend() with one token at a time: the press sees none of them, as in perplexity().
  for (int p = 32; p < 63; ++p) {
    const float* logits = session.extend({tokens[size_t(p)]});
    long double z = 0;
    for (int v = 0; v < n_vocab; ++v) z += std::exp((long double)logits[v]);
    nll += std::log(z) - (long double)logits[tokens[size_t(p) + 1]];
  }
  const double expected = double(std::exp(nll / 31));
  EXPECT_NEAR(one.ppl, expected, 1e-4 * expected);
}

TEST(Perplexity, RefusesATextShorterThanTwoChunks) {
  const auto model = tiny();
  ThreadPool pool(1);
  const std::vector<int32_t> tokens = eval::perplexity_tokens(*model, "short text");
  eval::PerplexityOptions options;
  options.ctx = 64;
  try {
    eval::perplexity(*model, pool, tokens, options);
    FAIL() << "short text accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 128"), std::string::npos) << e.what();
  }
}

TEST(Perplexity, CliJson) {
  testing::TinyModel m;
  const std::string model = testing::make_model(m);
  const std::string text = testing::temp_path("ppl.txt");
  {
    std::ofstream out(text);
    out << sample_text();
  }
  const testing::CommandResult r =
      testing::run("perplexity -m " + model + " -f " + text + " --ctx 64 --chunks 2 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["chunks"].size(), 2u);
  EXPECT_EQ(j["tokens_scored"].get<int>(), 62);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_NE(r.err.find("ETA"), std::string::npos) << r.err;
  const testing::CommandResult bad = testing::run("perplexity -m " + model + " -f " + text + " --ctx 4096");
  testing::expect_clean_error(bad, "needs at least 8192");
}

}  // namespace
}  // namespace kvslim
