// Turns logits into the next token: repetition penalty, top-k, top-p, min-p, temperature, then
// a seeded draw (llama.cpp's order). Temperature <= 0 is greedy (lowest id wins ties).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvslim {

struct SamplerParams {
  float temperature = 0.8f;
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 1234;

  void validate() const;  // throws kvslim::Error naming the bad parameter
};

class Sampler {
 public:
  Sampler(const SamplerParams& params, int n_vocab);

  // history: the tokens so far (prompt and generated), for the repetition penalty.
  int32_t sample(const float* logits, const std::vector<int32_t>& history);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  int32_t argmax(const float* logits) const;
  double uniform();

  SamplerParams params_;
  int n_vocab_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // n_vocab, reused every step
  std::vector<float> penalized_;       // n_vocab, reused every step
};

}  // namespace kvslim
