// Sampling: greedy, determinism by seed, and each filter against hand-computed expectations.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"
#include "util/error.h"

namespace kvslim {
namespace {

SamplerParams plain(float temperature, uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::map<int32_t, int> histogram(SamplerParams p, const std::vector<float>& logits, int draws) {
  Sampler s(p, int(logits.size()));
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits.data(), {})];
  return h;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  Sampler s(plain(0), 5);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits.data(), {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  auto draw = [&](uint64_t seed) {
    Sampler s(plain(1.0f, seed), 100);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits.data(), {}));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // logits log(1), log(2), log(7): probabilities 0.1, 0.2, 0.7.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(7.0f)};
  const int draws = 20000;
  auto h = histogram(plain(1.0f), logits, draws);
  EXPECT_NEAR(h[0] / double(draws), 0.1, 0.01);
  EXPECT_NEAR(h[1] / double(draws), 0.2, 0.015);
  EXPECT_NEAR(h[2] / double(draws), 0.7, 0.015);
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  SamplerParams p = plain(5.0f);
  p.top_k = 2;
  auto h = histogram(p, {3.0f, 1.0f, 2.5f, 0.0f}, 2000);
  EXPECT_EQ(h.count(1) + h.count(3), 0u);
  EXPECT_GT(h[0], 0);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // probabilities 0.5, 0.3, 0.2: top_p 0.75 keeps {0, 1}.
  SamplerParams p = plain(1.0f);
  p.top_p = 0.75f;
  auto h = histogram(p, {std::log(5.0f), std::log(3.0f), std::log(2.0f)}, 4000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_NEAR(h[0] / 4000.0, 0.625, 0.03);  // renormalised 0.5 / 0.8
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // probabilities 0.6, 0.3, 0.1: min_p 0.2 -> threshold 0.12 drops token 2.
  SamplerParams p = plain(1.0f);
  p.min_p = 0.2f;
  auto h = histogram(p, {std::log(6.0f), std::log(3.0f), std::log(1.0f)}, 4000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplerParams p = plain(0);
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  // Token 0 (logit 3, seen) becomes 1.5 < token 1's 2.0.
  const std::vector<float> logits = {3.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(logits.data(), {0}), 1);
  EXPECT_EQ(s.sample(logits.data(), {}), 0);
  // Token 1 seen too: 1.0 < 1.5, token 0 wins again.
  EXPECT_EQ(s.sample(logits.data(), {0, 1, 1}), 0);
}

TEST(Sampler, BadParametersAreRejected) {
  SamplerParams p;
  p.top_p = 0;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.temperature = -1;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.min_p = 1.5f;
  EXPECT_THROW(p.validate(), Error);
}

}  // namespace
}  // namespace kvslim
