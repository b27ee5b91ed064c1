// Generation time of the synthetic evaluation tasks: make_sample for every task at 2K and 8K
// tokens, each iteration a new seed. The tokenizer is the GGUF vocabulary named by
// KVSLIM_BENCH_VOCAB (e.g. ../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf), else the
// built-in byte vocabulary; tokenising the prompt a few times is most of the cost.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/byte_vocab.h"
#include "tasks/task.h"
#include "tokenizer/tokenizer.h"

namespace {

const kvslim::Tokenizer& bench_tokenizer() {
  static const kvslim::Tokenizer tokenizer = [] {
    if (const char* path = std::getenv("KVSLIM_BENCH_VOCAB")) {
      return kvslim::Tokenizer::from_gguf(kvslim::gguf::File::open(path));
    }
    const std::string path = (std::filesystem::temp_directory_path() / "kvslim-bench-byte-vocab.gguf").string();
    kvslim::gguf::Writer writer;
    writer.set("general.architecture", kvslim::gguf::Value::of_string("llama"));
    kvslim::add_byte_vocab(writer);
    writer.write(path);
    return kvslim::Tokenizer::from_gguf(kvslim::gguf::File::open(path));
  }();
  return tokenizer;
}

void make_samples(benchmark::State& state, const std::string& task) {
  const kvslim::Tokenizer& tokenizer = bench_tokenizer();
  uint64_t seed = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(kvslim::tasks::make_sample(task, state.range(0), seed++, tokenizer));
  }
}

const bool registered = [] {
  for (const kvslim::tasks::TaskInfo& info : kvslim::tasks::task_registry()) {
    benchmark::RegisterBenchmark(("MakeSample/" + info.name).c_str(), make_samples, info.name)
        ->Arg(2048)
        ->Arg(8192)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
