// kvslim inspect: which original positions each (layer, KV head) keeps after prefill (and with
// --scores the method's scores), as JSON for debugging and cross-checking implementations.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli/commands.h"
#include "cli/shared_options.h"
#include "cli/prompt_input.h"
#include "engine/kv_layers_json.h"
#include "engine/session.h"
#include "press/registry.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

struct InspectOptions {
  std::string model;
  PromptInput prompt;
  CompressionOptions compression;
  EngineOptions engine;
  int threads = 0;
  bool scores = false;
  bool no_bos = false;
  std::string out;
};

void run_inspect(const InspectOptions& opt) {
  const PreparedCompression compression = opt.compression.prepare();
  const auto model = Model::load(opt.model);
  const Tokenizer& tokenizer = model->tokenizer();
  const auto tokens = tokenizer.encode(opt.prompt.read(), tokenizer.add_bos_by_default() && !opt.no_bos, true);
  validate_prompt(*model, opt.engine, tokens);
  const int64_t budget = compression.budget_for(int64_t(tokens.size()));
  ThreadPool pool(opt.threads);
  Session session(
      *model, pool,
      {.engine = opt.engine, .capacity = int64_t(tokens.size()), .press = compression.press.get(), .budget = budget});
  if (opt.scores) session.record_scores();
  session.prefill(tokens);

  const PagedKvCache& kv = session.kv();
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < kv.n_layers(); ++l) {
    nlohmann::json heads = nlohmann::json::array();
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const HeadCache& head = kv.head(l, h);
      std::vector<int64_t> positions(head.size());
      for (int64_t i = 0; i < head.size(); ++i) positions[i] = head.position(i);
      nlohmann::json entry = {{"kv_head", h}, {"positions", positions}};
      if (opt.scores) entry["scores"] = session.recorded_scores(l, h);
      heads.push_back(entry);
    }
    layers.push_back(heads);
  }
  const nlohmann::json out = {{"model", opt.model},
                              {"press", opt.compression.press},
                              {"budget", budget == kNoBudget ? 0 : budget},
                              {"n_prompt", tokens.size()},
                              {"token_ids", tokens},
                              {"layers", layers},
                              {"kv_layers", kv_layers_json(kv)}};
  std::ofstream file(opt.out);
  if (!file) fail("cannot write '{}'", opt.out);
  file << out.dump() << "\n";
  if (!file) fail("cannot write '{}'", opt.out);
  fmt::print(stderr, "wrote {} ({} layers x {} KV heads)\n", opt.out, kv.n_layers(), kv.n_kv_heads());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "write the positions each layer and KV head keeps after prefill");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  opt->prompt.add_options(*cmd);
  add_compression_options(*cmd, opt->compression);
  add_engine_options(*cmd, opt->engine, opt->threads);
  cmd->add_flag("--scores", opt->scores, "also write the scores the method selected by");
  cmd->add_flag("--no-bos", opt->no_bos, "do not prepend BOS");
  cmd->add_option("-o,--output", opt->out, "output JSON file")->required();
  cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace kvslim::cli
