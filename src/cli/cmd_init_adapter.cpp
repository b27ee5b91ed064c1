// kvslim init-adapter: an untrained LookaheadKV adapter for a model (embeddings from the token
// embeddings' statistics, LoRA B = 0), so that --press lookaheadkv runs before any training.
#include <fmt/format.h>

#include "cli/commands.h"
#include "model/lookahead_adapter.h"
#include "model/model.h"

namespace kvslim::cli {

void add_init_adapter_command(CLI::App& app) {
  struct Options {
    std::string model, out;
    AdapterShape shape;
    uint64_t seed = 1;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("init-adapter", "write an untrained LookaheadKV adapter for a model");
  cmd->add_option("-m,--model", opt->model, "base GGUF model")->required();
  cmd->add_option("-o,--output", opt->out, "output adapter GGUF")->required();
  cmd->add_option("--lookahead", opt->shape.n_lookahead, "lookahead rows m")->capture_default_str();
  cmd->add_option("--rank", opt->shape.rank, "LoRA rank")->capture_default_str();
  cmd->add_option("--alpha", opt->shape.alpha, "LoRA alpha (scale alpha/rank)")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "initialisation seed")->capture_default_str();
  cmd->callback([opt] {
    const auto model = Model::load(opt->model);
    const LookaheadAdapter adapter = LookaheadAdapter::initial(*model, opt->shape, opt->seed);
    adapter.save(opt->out);
    fmt::print(stderr, "wrote {} ({} lookahead rows, LoRA rank {}, base fingerprint {:016x})\n", opt->out,
               adapter.n_lookahead, adapter.lora.rank(), adapter.base_fingerprint);
  });
}

}  // namespace kvslim::cli
