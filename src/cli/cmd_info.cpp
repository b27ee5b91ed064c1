// kvslim info: what a model file holds.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

#include "cli/commands.h"
#include "model/model.h"

namespace kvslim::cli {

namespace {

// Keys and values of every layer and KV head for one token, per KV page type
// (--cache-type-k/-v); q8_0 only when the head size is a multiple of 32.
nlohmann::json kv_bytes_by_type(const ModelConfig& c) {
  nlohmann::json out = nlohmann::json::object();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    if (t == DType::Q8_0 && c.head_dim % kQ8Block != 0) continue;
    out[dtype_name(t)] = uint64_t(c.n_layers) * c.n_kv_heads * 2 * kv_row_bytes(t, c.head_dim);
  }
  return out;
}

nlohmann::json describe(const Model& model) {
  const ModelConfig& c = model.config();
  std::map<std::string, int> tensor_types;
  for (const auto& t : model.file().tensors()) ++tensor_types[gguf::tensor_type_name(t.type)];
  const Tokenizer& tok = model.tokenizer();
  return {
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
      {"kv_bytes_per_token", model.kv_bytes_per_token()},  // f32 pages
      {"kv_bytes_per_token_by_type", kv_bytes_by_type(c)},
      {"tokenizer", {{"model", tok.model_name()}, {"pre", tok.pre_name()}, {"tokens", tok.n_vocab()},
                     {"bos", tok.bos_id()}, {"eos", tok.eos_id()}, {"add_bos", tok.add_bos_by_default()}}},
  };
}

}  // namespace

void add_info_command(CLI::App& app) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("info", "architecture, shapes, types, tokenizer and sizes of a model");
  cmd->add_option("model", opt->model, "GGUF model")->required();
  cmd->add_flag("--json", opt->json, "print JSON");
  cmd->callback([opt] {
    const auto model = Model::load(opt->model);
    const nlohmann::json info = describe(*model);
    if (opt->json) {
      fmt::print("{}\n", info.dump(2));
      return;
    }
    for (const auto& [key, value] : info.items()) fmt::print("{:<20} {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
  });
}

}  // namespace kvslim::cli
