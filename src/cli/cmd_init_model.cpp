// kvslim init-model: a GGUF model with random weights (for tests and benchmarks).
#include <fmt/format.h>

#include "cli/commands.h"
#include "model/random_model.h"

namespace kvslim::cli {

void add_init_model_command(CLI::App& app) {
  struct Options {
    RandomModelSpec spec;
    std::string arch = "llama";
    std::string type = "f16";
    std::string vocab;
    std::string out;
  };
  auto opt = std::make_shared<Options>();
  ModelConfig& c = opt->spec.config;
  c.n_layers = 2;
  c.dim = 256;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 768;
  c.context_length = 4096;
  c.moe.n_experts = 0;
  c.moe.n_experts_used = 0;
  CLI::App* cmd = app.add_subcommand("init-model", "write a model with random weights and a copied tokenizer");
  cmd->add_option(
         "--arch", opt->arch,
         "llama, qwen2, qwen3, phi3 (fused QKV and gate/up, LongRoPE), smollm3, gemma3 (sliding-window layers) or "
         "qwen3moe (mixture of experts: --experts, --experts-used) or gpt-oss (experts, attention sinks, sliding "
         "layers, YaRN)")
      ->capture_default_str();
  cmd->add_option("--layers", c.n_layers, "transformer blocks")->capture_default_str();
  cmd->add_option("--dim", c.dim, "embedding size")->capture_default_str();
  cmd->add_option("--heads", c.n_heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", c.n_kv_heads, "key/value heads")->capture_default_str();
  cmd->add_option("--head-dim", c.head_dim, "size of each head (0: dim / heads)")->capture_default_str();
  cmd->add_option("--ffn", c.ffn_dim, "feed-forward size (qwen3moe, gpt-oss: each expert's)")->capture_default_str();
  cmd->add_option("--experts", c.moe.n_experts, "qwen3moe, gpt-oss: experts per layer")->capture_default_str();
  cmd->add_option("--experts-used", c.moe.n_experts_used, "qwen3moe, gpt-oss: experts each token uses (top k)")
      ->capture_default_str();
  cmd->add_option("--vocab-from", opt->vocab, "GGUF whose tokenizer is copied (default: a built-in byte vocabulary)");
  cmd->add_option("--type", opt->type,
                  "matrix type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
                  "iq4_xs or mxfp4")
      ->capture_default_str();
  cmd->add_option("--ctx", c.context_length, "context length stored in the metadata")->capture_default_str();
  cmd->add_option("--rope-base", c.rope_base, "RoPE frequency base")->capture_default_str();
  cmd->add_flag("--tied", opt->spec.tied_output, "no output.weight: reuse the token embedding");
  cmd->add_flag("--rope-freqs", opt->spec.rope_freqs, "write a rope_freqs.weight tensor (Llama 3.1 style)");
  cmd->add_option("--seed", opt->spec.seed, "weight seed")->capture_default_str();
  cmd->add_option("--weight-std", opt->spec.weight_std,
                  "standard deviation of the matrices' entries (0: 1/sqrt(inputs), nearly flat logits)")
      ->capture_default_str();
  cmd->add_option("--rope-dims", opt->spec.rope_dims, "rotated dimensions per head (0: all; phi3: 3/4 of the head)")
      ->capture_default_str();
  cmd->add_option("--window", opt->spec.sliding_window,
                  "gemma3: sliding window of the local layers (0: none); gpt-oss: of its even layers (0: 128)")
      ->capture_default_str();
  cmd->add_option("--swa-period", opt->spec.swa_period,
                  "gemma3: every N-th layer is global (6, llama.cpp's default, is not written)")
      ->capture_default_str();
  cmd->add_option("-o,--output", opt->out, "output GGUF path")->required();
  cmd->callback([opt] {
    opt->spec.config.arch = arch_from_name(opt->arch);
    const Arch arch = opt->spec.config.arch;
    if ((arch == Arch::Qwen3Moe || arch == Arch::GptOss) && opt->spec.config.moe.n_experts == 0) {  // a small default
      opt->spec.config.moe.n_experts = 8;
      opt->spec.config.moe.n_experts_used = 2;
    }
    opt->spec.type = dtype_from_name(opt->type.c_str());
    write_random_model(opt->spec, opt->vocab, opt->out);
    fmt::print(stderr, "wrote {}\n", opt->out);
  });
}

}  // namespace kvslim::cli
