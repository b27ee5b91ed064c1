// kvslim info: what a model file holds.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "engine/system_info.h"
#include "model/model.h"

namespace kvslim::cli {

namespace {

// Keys and values of every KV head per KV page type (--cache-type-k/-v; q8_0 only when the head
// size is a multiple of 32). A sliding-window layer keeps K and V of its last `window` tokens
// only, so per token of context only the layers without a window grow (kv_bytes_per_token), and
// the window layers hold at most kv_bytes_windows in all, whatever the context.
void add_kv_sizes(const ModelConfig& c, nlohmann::json& info) {
  int full_layers = 0;
  uint64_t window_tokens = 0;  // summed over the window layers
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.is_local_layer(l)) {
      window_tokens += uint64_t(c.layer_window[size_t(l)]);
    } else {
      ++full_layers;
    }
  }
  nlohmann::json per_token = nlohmann::json::object(), windows = nlohmann::json::object();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    if (t == DType::Q8_0 && c.head_dim % kQ8Block != 0) continue;
    const uint64_t layer_token = uint64_t(c.n_kv_heads) * 2 * kv_row_bytes(t, c.head_dim);  // K and V
    per_token[dtype_name(t)] = uint64_t(full_layers) * layer_token;
    windows[dtype_name(t)] = window_tokens * layer_token;
  }
  info["kv_bytes_per_token"] = per_token["f32"];  // f32 pages
  info["kv_bytes_per_token_by_type"] = per_token;
  if (window_tokens > 0) {
    info["kv_bytes_windows"] = windows["f32"];
    info["kv_bytes_windows_by_type"] = windows;
  }
}

nlohmann::json describe(const Model& model) {
  const ModelConfig& c = model.config();
  std::map<std::string, int> tensor_types;
  for (const auto& t : model.file().tensors()) ++tensor_types[gguf::tensor_type_name(t.type)];
  const Tokenizer& tok = model.tokenizer();
  nlohmann::json info = {
      {"path", model.file().path()},
      {"architecture", arch_name(c.arch)},
      {"layers", c.n_layers},
      {"dim", c.dim},
      {"ffn_dim", c.ffn_dim},
      {"heads", c.n_heads},
      {"kv_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"rope_dims", c.n_rot},
      {"rope_base", c.rope_base},
      {"rope_freq_factors", !model.rope_freq_factors().empty()},
      {"context_length", c.context_length},
      {"vocab_size", c.n_vocab},
      {"tied_output", model.output_is_tied()},
      {"tensor_types", tensor_types},
      {"token_embd_type", dtype_name(model.token_embedding().type)},
      {"output_type", dtype_name(model.output().type)},
      {"tensors", model.file().tensors().size()},
      {"weight_bytes", model.weight_bytes()},
      {"tokenizer",
       {{"model", tok.model_name()},
        {"pre", tok.pre_name()},
        {"tokens", tok.n_vocab()},
        {"bos", tok.bos_id()},
        {"eos", tok.eos_id()},
        {"add_bos", tok.add_bos_by_default()}}},
  };
  if (c.is_moe()) {  // what a decoded token reads is k of n experts per layer
    info["experts"] = c.moe.n_experts;
    info["experts_used"] = c.moe.n_experts_used;
    info["expert_ffn_dim"] = c.moe.expert_ffn_dim;
    info["active_weight_bytes_per_token"] = model.active_weight_bytes_per_token();
  }
  const int sliding = int(std::count_if(c.layer_window.begin(), c.layer_window.end(), [](int w) { return w > 0; }));
  if (sliding > 0) {
    info["sliding_window"] = *std::max_element(c.layer_window.begin(), c.layer_window.end());
    info["sliding_layers"] = sliding;
  }
  if (c.is_gptoss()) info["attention_sinks"] = true;
  add_kv_sizes(c, info);
  return info;
}

}  // namespace

void add_info_command(CLI::App& app) {
  struct Options {
    std::string model;
    bool json = false;
    bool system = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "info", "architecture, shapes, types, tokenizer and sizes of a model; --system: the CPU and kernels");
  cmd->add_option("model", opt->model, "GGUF model (optional with --system)");
  cmd->add_flag("--system", opt->system,
                "the CPU, the instruction-set level the kernels run at (KVSLIM_ISA forces a lower one) and the kernel "
                "of each weight and KV type");
  cmd->add_flag("--json", opt->json, "print JSON");
  cmd->callback([opt] {
    if (opt->model.empty() && !opt->system) throw CLI::RequiredError("model");
    nlohmann::json info;
    std::unique_ptr<Model> model;
    if (!opt->model.empty()) {
      model = Model::load(opt->model);
      info = describe(*model);
    }
    if (opt->system) info["system"] = system_info(model ? model->config().head_dim : 0);
    if (opt->json) {
      fmt::print("{}\n", info.dump(2));
      return;
    }
    for (const auto& [key, value] : info.items()) {
      if (key == "system") continue;
      fmt::print("{:<20} {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
    }
    if (!opt->system) return;
    const nlohmann::json& sys = info["system"];
    fmt::print("{:<20} {}\n", "cpu", sys["cpu"].get<std::string>());
    fmt::print("{:<20} {} (best {}; this CPU runs: {}; compiled: {})\n", "isa", sys["isa"].get<std::string>(),
               sys["isa_best"].get<std::string>(),
               fmt::join(sys["isa_supported"].get<std::vector<std::string>>(), ", "),
               fmt::join(sys["isa_compiled"].get<std::vector<std::string>>(), ", "));
    for (const auto& [type, k] : sys["weight_kernels"].items()) {
      fmt::print("{:<20} decode: {}; prefill: {}\n", "weights " + type, k["decode"].get<std::string>(),
                 k["prefill"].get<std::string>());
    }
    if (sys.contains("kv_kernels")) {
      for (const auto& [type, k] : sys["kv_kernels"].items())
        fmt::print("{:<20} {}\n", "kv " + type, k.get<std::string>());
    }
    fmt::print("{:<20} {}\n", "attention prefill", sys["attention_prefill_kernel"].get<std::string>());
  });
}

}  // namespace kvslim::cli
