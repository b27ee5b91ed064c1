// kvslim generate: prefill a prompt and sample a continuation, streamed or as one JSON object.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/commands.h"
#include "cli/shared_options.h"
#include "cli/prompt_input.h"
#include "engine/live_session.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "util/error.h"
#include "model/model.h"

namespace kvslim::cli {

namespace {

struct GenerateOptions {
  std::string model;
  PromptInput prompt;
  int n_predict = 128;
  SamplerParams sampling;
  CompressionOptions compression;
  EngineOptions engine;
  int threads = 0;
  bool no_bos = false;
  bool no_special = false;
  bool json = false;
  std::string save_kv, load_kv;
  std::string lookahead_adapter;  // --lookahead-adapter
};

double per_second(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

// --save-kv / --load-kv: the prompt runs as a turn of a LiveSession, which a KV file can hold
// ("compress once, ask many": a loaded document is not prefilled again, only the question is).
void run_with_kv_file(const GenerateOptions& opt, const Model& model, ThreadPool& pool,
                      const std::function<void(const std::string&)>& stream) {
  const Tokenizer& tokenizer = model.tokenizer();
  std::unique_ptr<LiveSession> live;
  std::vector<int32_t> conversation;
  const std::string text = opt.prompt.read();
  if (!opt.load_kv.empty()) {
    live = LiveSession::load(opt.load_kv, model, pool, opt.engine, opt.sampling);
    conversation = live->transcript();
    const std::vector<int32_t> question = tokenizer.encode(text, false, !opt.no_special);
    conversation.insert(conversation.end(), question.begin(), question.end());
  } else {
    live = std::make_unique<LiveSession>(model, pool, opt.engine, opt.compression, opt.sampling);
    conversation = tokenizer.encode(text, tokenizer.add_bos_by_default() && !opt.no_bos, !opt.no_special);
  }
  live->prompt(conversation, opt.n_predict);
  const Answer a = live->answer(opt.n_predict, pieces_only(stream));
  if (!opt.save_kv.empty()) live->save(opt.save_kv);
  const TurnStats& t = live->last_turn();
  if (opt.json) {
    nlohmann::json out = {
        {"text", a.text},
        {"token_ids", a.tokens},
        {"n_generated", a.tokens.size()},
        {"stop_reason", to_string(a.stop_reason)},
        {"press", live->compression().press},
        {"turn_tokens", t.turn_tokens},
        {"reused_tokens", t.reused},
        {"history_tokens", t.history},
        {"kept_tokens", t.kept_tokens},
        {"prefill_ms", t.prefill_ms},
        {"decode_ms", t.decode_ms},
        {"prefill_tok_s", t.prefill_tokens_per_s()},
        {"decode_tok_s", t.decode_tokens_per_s()},
        {"kv_bytes_final", t.kv_bytes},
        {"kv_bytes_peak", live->session()->kv().peak_bytes()},
        {"seed", opt.sampling.seed},
    };
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("\n");
    fmt::print(stderr,
               "prompt: {} tokens run, {} reused from the KV file, {:.1f} ms ({:.1f} tok/s); generated: {} "
               "tokens, {:.1f} ms ({:.1f} tok/s); stop: {}; press {} ({:.1f} tokens kept per head); KV bytes {}{}\n",
               t.turn_tokens, t.reused, t.prefill_ms, t.prefill_tokens_per_s(), a.tokens.size(), t.decode_ms,
               t.decode_tokens_per_s(), to_string(a.stop_reason), live->compression().press, t.kept_tokens, t.kv_bytes,
               opt.save_kv.empty() ? "" : "; saved " + opt.save_kv);
  }
}

void run_generate(GenerateOptions opt) {
  if (!opt.load_kv.empty()) refuse_compression_with_load_kv(opt.compression, opt.lookahead_adapter);
  opt.compression.find_default_adapter(opt.model, opt.lookahead_adapter);
  const auto model = Model::load(opt.model);
  const Tokenizer& tokenizer = model->tokenizer();
  ThreadPool pool(opt.threads);
  std::function<void(const std::string&)> stream;
  if (!opt.json) {
    stream = [](const std::string& piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }
  if (!opt.save_kv.empty() || !opt.load_kv.empty()) return run_with_kv_file(opt, *model, pool, stream);
  GenerateRequest request;
  request.prompt = tokenizer.encode(opt.prompt.read(), tokenizer.add_bos_by_default() && !opt.no_bos, !opt.no_special);
  request.n_predict = opt.n_predict;
  request.sampling = opt.sampling;
  request.compression = opt.compression;
  const GenerateResult r = generate(*model, pool, opt.engine, request, stream);
  const double prefill_tok_s = per_second(r.n_prompt, r.prefill_ms);
  const double decode_tok_s = per_second(r.decode_steps, r.decode_ms);
  if (opt.json) {
    nlohmann::json out = {
        {"text", r.text},
        {"n_prompt", r.n_prompt},
        {"n_generated", r.tokens.size()},
        {"stop_reason", to_string(r.stop_reason)},
        {"prefill_ms", r.prefill_ms},
        {"decode_ms", r.decode_ms},
        {"prefill_tok_s", prefill_tok_s},
        {"decode_tok_s", decode_tok_s},
        {"kv_bytes_peak", r.kv_bytes_peak},
        {"kv_bytes_final", r.kv_bytes_final},
        {"cache_type_k", dtype_name(opt.engine.cache_type_k)},
        {"cache_type_v", dtype_name(opt.engine.cache_type_v)},
        {"token_ids", r.tokens},
        {"seed", opt.sampling.seed},
        {"press", opt.compression.press},
        {"budget", r.budget},
        {"score_ms", r.score_ms},
        {"kept_tokens", r.kept_tokens},
        // Token-equivalents per (layer, KV head): null for sparse attention without a report.
        {"storage_tokens", r.token_cost ? nlohmann::json(r.token_cost->storage) : nlohmann::json()},
        {"traffic_tokens", r.token_cost ? nlohmann::json(r.token_cost->traffic) : nlohmann::json()},
        {"threads", pool.size()},
        {"kv_layers", r.kv_layers},
    };
    // Invalid UTF-8 (a multi-byte character cut by -n) is replaced rather than refused.
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("\n");
    fmt::print(stderr,
               "prompt: {} tokens, {:.1f} ms ({:.1f} tok/s); generated: {} tokens, {:.1f} ms ({:.1f} tok/s); "
               "stop: {}; press {} (scoring {:.1f} ms, {:.1f} tokens kept per head); KV bytes peak {} final {}\n",
               r.n_prompt, r.prefill_ms, prefill_tok_s, r.tokens.size(), r.decode_ms, decode_tok_s,
               to_string(r.stop_reason), opt.compression.press, r.score_ms, r.kept_tokens, r.kv_bytes_peak,
               r.kv_bytes_final);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "generate a continuation of a prompt");
  cmd->add_option("-m,--model", opt->model, "GGUF model")->required();
  opt->prompt.add_options(*cmd);
  cmd->add_option("-n,--n-predict", opt->n_predict, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temp", opt->sampling.temperature, "temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", opt->sampling.top_k, "top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", opt->sampling.top_p, "top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", opt->sampling.min_p, "min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", opt->sampling.repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", opt->sampling.repeat_last_n, "tokens the penalty looks back")
      ->capture_default_str();
  cmd->add_option("--seed", opt->sampling.seed, "sampling seed")->capture_default_str();
  add_compression_options(*cmd, opt->compression);
  add_lookahead_adapter_option(*cmd, opt->lookahead_adapter);
  add_engine_options(*cmd, opt->engine, opt->threads);
  cmd->add_flag("--no-bos", opt->no_bos, "do not prepend BOS even if the tokenizer asks for it");
  cmd->add_flag("--no-special", opt->no_special, "treat special-token text in the prompt as plain text");
  cmd->add_flag("--json", opt->json, "print one JSON object with the text, ids and timings");
  cmd->add_option("--save-kv", opt->save_kv, "write the compressed KV (prompt and answer) to FILE afterwards");
  cmd->add_option("--load-kv", opt->load_kv, "continue a KV file: the prompt is appended to its history (no BOS)");
  cmd->callback([opt] { run_generate(*opt); });
}

}  // namespace kvslim::cli
