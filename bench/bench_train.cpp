// Training throughput: forward + backward tokens/s of the trainer's llama model at the sizes
// the project trains (4-6 layers, dim 256-384, GQA with 2 KV heads, vocab 2K), for sequences of
// 512 and 2048 tokens, 4096 tokens per forward/backward, on 2 threads. Reported: tokens/s
// (wall) and the parameter count.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "train/train_model.h"
#include "util/thread_pool.h"

namespace {

using kvslim::train::TrainModel;
using kvslim::train::TrainSequence;

void bm_train_fwd_bwd(benchmark::State& state, int layers, int dim, int heads, int ffn, int vocab, int seq_len) {
  kvslim::ModelConfig c;
  c.n_layers = layers;
  c.dim = dim;
  c.n_heads = heads;
  c.n_kv_heads = 2;
  c.ffn_dim = ffn;
  c.n_vocab = vocab;
  c.context_length = seq_len;
  TrainModel<float> model(c, true);
  model.init_params(1);
  kvslim::ThreadPool pool(2);
  std::mt19937 rng(3);
  std::vector<TrainSequence> batch(size_t(4096 / seq_len));
  for (auto& s : batch) {
    for (int t = 0; t <= seq_len; ++t) s.tokens.push_back(int32_t(rng() % c.n_vocab));
    s.weights.assign(s.tokens.size(), 1.0f);
  }
  for (auto _ : state) {
    model.zero_grads();
    model.forward(batch, pool);
    model.backward(1.0f, pool);
  }
  state.counters["tokens/s"] = benchmark::Counter(4096.0 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["params_M"] = double(model.layout().size()) / 1e6;
}

// The size train-model's trials settled on, then the range.
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l4_d128_h4_ffn384_v1024_s512, 4, 128, 4, 384, 1024, 512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l4_d128_h4_ffn384_v1024_s2048, 4, 128, 4, 384, 1024, 2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l4_d256_h4_ffn768_v2048_s512, 4, 256, 4, 768, 2048, 512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l4_d256_h4_ffn768_v2048_s2048, 4, 256, 4, 768, 2048, 2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l6_d384_h6_ffn1024_v2048_s512, 6, 384, 6, 1024, 2048, 512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_train_fwd_bwd, l6_d384_h6_ffn1024_v2048_s2048, 6, 384, 6, 1024, 2048, 2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
