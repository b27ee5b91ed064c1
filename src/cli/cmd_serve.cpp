// kvslim serve: an OpenAI-compatible HTTP server where every request chooses its KV compression.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "cli/commands.h"
#include "cli/shared_options.h"
#include "server/http_server.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

void run_serve(server::ServerOptions opt, const std::string& lookahead_adapter) {
  opt.engine.validate();
  // Requests may not name files: lookaheadkv per request runs with this adapter.
  opt.compression.find_default_adapter(opt.model_path, lookahead_adapter);
  // The server's own method is built once at start: an unknown method, a bad option or a budget its
  // options cannot work with is one error line now rather than a failure on every request.
  // --prefill-evict block is the server's setting for the methods that have it (its own included).
  opt.compression.with_block_eviction_where_supported().prepare();
  if (opt.parallel < 1 || opt.parallel > 64) fail("--parallel must be in [1, 64] (got {})", opt.parallel);
  if (opt.queue < 0 || opt.queue > 4096) fail("--queue must be in [0, 4096] (got {})", opt.queue);
  if (opt.kv_mem_mib < 0) fail("--kv-mem must be >= 0 MiB (got {})", opt.kv_mem_mib);
  if (opt.max_body_bytes < 1024) fail("--max-body must be >= 1024 bytes (got {})", opt.max_body_bytes);
  if (opt.limits.max_tokens < 1) fail("--max-tokens must be >= 1 (got {})", opt.limits.max_tokens);
  if (opt.limits.default_max_tokens < 0) fail("-n must be >= 0 (got {})", opt.limits.default_max_tokens);
  if (opt.host != "127.0.0.1" && opt.host != "localhost" && opt.host != "::1" && opt.api_key.empty())
    fmt::print(stderr, "kvslim serve: warning: listening on {} without --api-key: anyone who can reach it can use it\n",
               opt.host);

  // SIGINT/SIGTERM stop the server cleanly. The handler only sets a flag (libraries such as
  // OpenBLAS start threads before main, so a signal can land on any thread); a watcher thread
  // turns it into stop().
  static std::atomic<bool> stop_requested{false};
  struct sigaction action {};
  action.sa_handler = [](int) { stop_requested = true; };
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-answer is an error on that write only

  server::HttpServer http(opt);
  const int port = http.bind();
  fmt::print(stderr, "kvslim serve: listening on http://{}:{} (loading {})\n", opt.host, port, opt.model_path);
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished) {
      if (stop_requested.exchange(false)) http.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  try {
    http.run();
  } catch (...) {
    finished = true;
    watcher.join();
    throw;
  }
  finished = true;
  watcher.join();
  fmt::print(stderr, "kvslim serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<server::ServerOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "serve an OpenAI-compatible HTTP API (per-request KV compression)");
  cmd->add_option("-m,--model", opt->model_path, "GGUF model")->required();
  cmd->add_option("--host", opt->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->port, "port (0: any free port, printed on start)")->capture_default_str();
  cmd->add_option("--parallel", opt->parallel, "slots: requests generated at once")->capture_default_str();
  cmd->add_option("--queue", opt->queue, "requests waiting for a slot before answering 503")->capture_default_str();
  cmd->add_option("--kv-mem", opt->kv_mem_mib, "cap on the KV memory of all slots, MiB (0: none)")
      ->capture_default_str();
  add_compression_options(*cmd, opt->compression);
  auto lookahead_adapter = std::make_shared<std::string>();
  add_lookahead_adapter_option(*cmd, *lookahead_adapter);
  add_engine_options(*cmd, opt->engine, opt->threads);
  cmd->add_option("--chat-template", opt->chat_template, "Jinja chat template file (overrides the model's)");
  cmd->add_option("--api-key", opt->api_key, "require Authorization: Bearer KEY on every endpoint but /health");
  cmd->add_option("--slot-save-path", opt->slot_save_path, "folder for POST /slots/{id}?action=save|restore files");
  cmd->add_option("--alias", opt->alias, "model id in /v1/models (default: the file name)");
  cmd->add_option("-n,--n-predict", opt->limits.default_max_tokens, "max_tokens when a request gives none")
      ->capture_default_str();
  cmd->add_option("--max-tokens", opt->limits.max_tokens, "largest max_tokens a request may ask for")
      ->capture_default_str();
  cmd->add_option("--max-body", opt->max_body_bytes, "largest request body in bytes (413 beyond)")
      ->capture_default_str();
  cmd->callback([opt, lookahead_adapter] { run_serve(*opt, *lookahead_adapter); });
}

}  // namespace kvslim::cli
