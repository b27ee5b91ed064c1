// kvslim serve: the HTTP side. Binds first (so /health answers 503 while the model loads), loads
// the model in the background, then routes the OpenAI-compatible and llama.cpp-style endpoints to
// the scheduler. Every refusal is an OpenAI-shaped JSON error; nothing a client sends can crash it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "chat/chat_template.h"
#include "engine/session.h"
#include "server/metrics.h"
#include "server/request_parser.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvslim {
class Model;
class ThreadPool;
}  // namespace kvslim

namespace kvslim::server {

class Scheduler;
struct CompletionRequest;

// Writes `body` as the JSON response with `status` (every handler answers through this).
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

struct ServerOptions {
  std::string model_path;
  std::string alias;  // the model id in /v1/models (default: the file name)
  std::string host = "127.0.0.1";
  int port = 8080;   // 0: any free port
  int parallel = 1;  // slots
  int queue = 16;    // requests waiting for a slot before 503
  EngineOptions engine;
  int threads = 0;
  CompressionOptions compression;  // the default for requests that name none
  std::string chat_template;       // file overriding the model's template
  std::string api_key;
  std::string slot_save_path;
  size_t max_body_bytes = 8u << 20;
  int64_t kv_mem_mib = 0;  // 0: no cap
  RequestLimits limits;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();

  // Binds the socket; returns the port (the chosen one when options.port is 0). Throws
  // kvslim::Error when it cannot.
  int bind();
  // Loads the model in the background and serves until stop(); throws kvslim::Error when the
  // model or the chat template cannot be loaded.
  void run();
  void stop();

 private:
  void routes();
  void load();
  bool ready() const { return ready_.load(); }

  // Endpoints.
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void apply_template(const httplib::Request& req, httplib::Response& res);
  void props(httplib::Response& res);
  void models(httplib::Response& res);
  void slot_action(const httplib::Request& req, httplib::Response& res);

  // Pieces of a completion.
  std::string render_chat(const nlohmann::ordered_json& messages) const;
  std::vector<int32_t> prompt_tokens(const CompletionRequest& r) const;
  CompressionOptions compression_for(const CompletionRequest& r) const;

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  Metrics metrics_;
  std::atomic<bool> ready_{false};
  std::thread loader_;
  std::atomic<bool> listen_returned_{false};  // run()'s listen_after_bind() has returned
  std::optional<std::string> load_error_;
  std::mutex load_mutex_;

  // Set once by the loader before ready_.
  std::unique_ptr<Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::optional<ChatTemplate> template_;
  std::string template_error_;  // why chat is refused when the model has no template
  std::string model_id_;
};

}  // namespace kvslim::server
