// The press tests' session without a model: a real PagedKvCache the test fills (by hand or
// through its own forward), the budget, the prompt and the request's size, behind the
// PressContext a method sees. The press tests derive their fillers from it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_shape.h"
#include "kv/paged_cache.h"
#include "model/config.h"
#include "press/press.h"

namespace kvslim::testing {

struct FakeContextOptions {
  int64_t capacity = 0;  // tokens one head may hold
  int page_tokens = 256;
  DType page_type = DType::F32;  // keys and values
  int64_t budget = kNoBudget;
  std::vector<int32_t> prompt;
  int n_predict = 0;
  uint64_t seed = 0;              // PressContext::seed
  bool records_appended = false;  // run_appended is recorded; otherwise any call fails the test
};

class FakePressContext : public PressContext {
 public:
  FakePressContext(const ModelConfig& config, FakeContextOptions options)
      : config_(config),
        cache_(kv_shape(config, options.page_type, options.page_type), options.capacity, options.page_tokens),
        budget_(options.budget),
        prompt_(std::move(options.prompt)),
        n_predict_(options.n_predict),
        seed_(options.seed),
        records_appended_(options.records_appended) {}

  const ModelConfig& config() const override { return config_; }
  PagedKvCache& cache() override { return cache_; }
  int64_t budget() const override { return budget_; }
  const std::vector<int32_t>& prompt() const override { return prompt_; }
  int64_t n_past() const override { return n_past_; }
  int n_predict() const override { return n_predict_; }
  uint64_t seed() const override { return seed_; }
  // Recorded (with n_past() at the call) when records_appended; the cache is not touched.
  void run_appended(const std::vector<int32_t>& tokens, AttentionProbe*) override {
    if (!records_appended_) ADD_FAILURE() << "run_appended is not expected here";
    appended.push_back(tokens);
    appended_at.push_back(n_past_);
  }
  void run_appended_rows(const float*, int, const LoraAdapter*, AttentionProbe*) override {
    ADD_FAILURE() << "run_appended_rows is not expected here";
  }
  uint64_t model_fingerprint() const override { return 0; }
  std::vector<int32_t> generate_pseudo(int, AttentionProbe*) override {
    ADD_FAILURE() << "generate_pseudo is not expected here";
    return {};
  }
  void keep(int layer, int kv_head, std::span<const int32_t> indices) override {
    EXPECT_TRUE(std::is_sorted(indices.begin(), indices.end()));
    cache_.head(layer, kv_head).retain(indices, cache_.pool());
  }

  std::vector<std::vector<int32_t>> appended;  // what run_appended received
  std::vector<int64_t> appended_at;            // n_past() at each call

 protected:
  ModelConfig config_;
  PagedKvCache cache_;
  int64_t budget_;
  std::vector<int32_t> prompt_;
  int n_predict_;
  uint64_t seed_;
  bool records_appended_;
  int64_t n_past_ = 0;
};

}  // namespace kvslim::testing
