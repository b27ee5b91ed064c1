#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/press_catalogue.h"
#include "engine/system_info.h"
#include "model/fingerprint.h"
#include "model/lookahead_adapter.h"
#include "model/model.h"
#include "model/weight_residency.h"
#include "press/registry.h"
#include "server/openai_format.h"
#include "server/request_error.h"
#include "server/scheduler.h"
#include "server/web_page.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim::server {

using json = nlohmann::json;
using httplib::Request;
using httplib::Response;

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json; charset=utf-8");
}

namespace {

void send_error(Response& res, int status, const std::string& message, const std::string& param = "") {
  send_json(res, status, error_json(status, message, param));
}

// The endpoint as a metrics label: fixed names only, so clients cannot grow the label set.
std::string endpoint_label(const Request& req) {
  static const char* known[] = {"/",
                                "/health",
                                "/v1/health",
                                "/v1/models",
                                "/models",
                                "/v1/chat/completions",
                                "/chat/completions",
                                "/v1/completions",
                                "/completions",
                                "/tokenize",
                                "/detokenize",
                                "/apply-template",
                                "/props",
                                "/metrics",
                                "/slots"};
  for (const char* k : known)
    if (req.path == k) return k;
  if (req.path.rfind("/slots/", 0) == 0) return "/slots/{id}";
  return "other";
}

// Compares the whole key whatever the input, so timing does not reveal a matching prefix.
bool same_secret(const std::string& given, const std::string& expected) {
  if (expected.empty()) return false;
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  return diff == 0;
}

// Wraps a handler so that every refusal becomes a JSON error and nothing escapes to httplib.
template <class F>
httplib::Server::Handler guarded(F handler) {
  return [handler](const Request& req, Response& res) {
    try {
      handler(req, res);
    } catch (const RequestError& e) {
      send_error(res, e.status, e.what(), e.param);
    } catch (const Error& e) {
      send_error(res, 400, e.what());
    } catch (const std::bad_alloc&) {
      send_error(res, 500, "out of memory");
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    }
  };
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  if (options_.alias.empty()) options_.alias = std::filesystem::path(options_.model_path).filename().string();
  model_id_ = options_.alias;
  routes();
}

HttpServer::~HttpServer() {
  stop();
  if (loader_.joinable()) loader_.join();
  scheduler_.reset();  // before the model and pool it uses
}

int HttpServer::bind() {
  if (options_.port < 0 || options_.port > 65535) fail("--port must be in [0, 65535] (got {})", options_.port);
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port <= 0) fail("cannot listen on {} (any port)", options_.host);
    return port;
  }
  if (!http_->bind_to_port(options_.host, options_.port))
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", options_.host, options_.port);
  return options_.port;
}

void HttpServer::stop() {
  // Waiting handlers return once their jobs end: end them all, then stop accepting.
  if (ready()) scheduler_->cancel_all();
  http_->stop();
}

void HttpServer::load() {
  try {
    auto model = Model::load(options_.model_path);
    // The adapter lookaheadkv requests will run with is checked against the model now, so that a
    // wrong one is one error at start rather than a failed generation on every such request.
    if (const std::string& adapter = options_.compression.default_adapter; !adapter.empty()) {
      try {
        LookaheadAdapter::load(adapter, model->config(), model_fingerprint(*model));
      } catch (const Error& e) {
        throw Error(
            fmt::format("the LookaheadKV adapter {} does not fit the model: {} (give --lookahead-adapter FILE, "
                        "or move it away to serve without lookaheadkv)",
                        adapter, e.what()));
      }
      fmt::print(stderr, "kvslim serve: lookaheadkv runs with the adapter {}\n", adapter);
    }
    std::optional<ChatTemplate> chat;
    try {
      chat = ChatTemplate::for_model(*model, options_.chat_template);
    } catch (const Error& e) {
      // A broken --chat-template file is fatal; a model without a template only disables chat.
      if (!options_.chat_template.empty()) throw;
      template_error_ = e.what();
      fmt::print(stderr, "kvslim serve: /v1/chat/completions is disabled: {}\n", e.what());
    }
    auto pool = std::make_unique<ThreadPool>(options_.threads);
    SchedulerOptions so;
    so.n_slots = options_.parallel;
    so.queue_size = size_t(options_.queue);
    so.kv_mem_bytes = uint64_t(options_.kv_mem_mib) << 20;
    so.engine = options_.engine;
    auto scheduler = std::make_unique<Scheduler>(*model, *pool, so, metrics_);
    model_ = std::move(model);
    template_ = std::move(chat);
    pool_ = std::move(pool);
    scheduler_ = std::move(scheduler);
    ready_ = true;
    fmt::print(stderr, "kvslim serve: model loaded ({} slots, context {}, {} threads)\n", options_.parallel,
               options_.engine.context, pool_->size());
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(load_mutex_);
      load_error_ = e.what();
    }
    // cpp-httplib's stop() does nothing until listen_after_bind() has started, and on a busy
    // machine this thread can fail before run()'s thread gets there: the server would then listen
    // on without a model instead of exiting with the error. Wait for it (it is the next thing
    // run() does), then stop it.
    while (!http_->is_running() && !listen_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http_->stop();
  }
}

void HttpServer::run() {
  loader_ = std::thread([this] { load(); });
  http_->listen_after_bind();
  listen_returned_ = true;
  loader_.join();
  std::lock_guard lock(load_mutex_);
  if (load_error_) throw Error(*load_error_);
}

void HttpServer::routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  // Enough connection threads for every slot, every queued request and a few quick calls (health,
  // metrics) besides, so those never wait behind long generations.
  const size_t threads = size_t(options_.parallel + options_.queue + 4);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_read_timeout(30);
  s.set_write_timeout(30);
  // Idle keep-alive connections hold a connection thread; a short wait also lets stop() finish soon.
  s.set_keep_alive_timeout(2);

  s.set_pre_routing_handler([this](const Request& req, Response& res) {
    if (req.path == "/health" || req.path == "/v1/health") return httplib::Server::HandlerResponse::Unhandled;
    // The page itself holds no data; it asks for the key and sends it with every call.
    const bool page = req.method == "GET" && req.path == "/";
    if (!options_.api_key.empty() && !page) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string bearer = "Bearer ";
      if (auth.rfind(bearer, 0) != 0 || !same_secret(auth.substr(bearer.size()), options_.api_key)) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, 401, "invalid or missing API key: send the header Authorization: Bearer KEY");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!ready() && !page) {
      send_error(res, 503, "the model is loading");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_logger([this](const Request& req, const Response& res) { metrics_.request(endpoint_label(req), res.status); });
  s.set_error_handler([](const Request& req, Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its JSON error
    if (res.status == 404)
      send_error(res, 404, fmt::format("no endpoint {} {}", req.method, req.path));
    else if (res.status == 413)
      send_error(res, 413, "the request body is larger than the server's limit (--max-body)");
    else
      send_error(res, res.status, fmt::format("HTTP error {}", res.status));
  });
  s.set_exception_handler(
      [](const Request&, Response& res, std::exception_ptr) { send_error(res, 500, "internal error"); });

  s.Get("/", [](const Request&, Response& res) { res.set_content(web_page_html(), "text/html; charset=utf-8"); });
  auto health = [this](const Request&, Response& res) {
    if (ready())
      send_json(res, 200, {{"status", "ok"}});
    else
      send_json(res, 503, error_json(503, "the model is loading"));
  };
  s.Get("/health", health);
  s.Get("/v1/health", health);
  s.Get("/v1/models", guarded([this](const Request&, Response& res) { models(res); }));
  s.Get("/models", guarded([this](const Request&, Response& res) { models(res); }));
  for (const char* path : {"/v1/chat/completions", "/chat/completions"})
    s.Post(path, guarded([this](const Request& req, Response& res) { completions(req, res, true); }));
  for (const char* path : {"/v1/completions", "/completions"})
    s.Post(path, guarded([this](const Request& req, Response& res) { completions(req, res, false); }));
  s.Post("/tokenize", guarded([this](const Request& req, Response& res) { tokenize(req, res); }));
  s.Post("/detokenize", guarded([this](const Request& req, Response& res) { detokenize(req, res); }));
  s.Post("/apply-template", guarded([this](const Request& req, Response& res) { apply_template(req, res); }));
  s.Get("/props", guarded([this](const Request&, Response& res) { props(res); }));
  s.Get("/metrics", guarded([this](const Request&, Response& res) {
          res.set_content(metrics_.prometheus(options_.parallel), "text/plain; version=0.0.4");
        }));
  s.Get("/slots", guarded([this](const Request&, Response& res) { send_json(res, 200, scheduler_->slots_json()); }));
  s.Post(R"(/slots/(\d{1,9}))", guarded([this](const Request& req, Response& res) { slot_action(req, res); }));
}

void HttpServer::models(Response& res) {
  const ModelConfig& c = model_->config();
  json meta = {
      {"n_vocab", c.n_vocab}, {"n_ctx_train", c.context_length}, {"n_embd", c.dim},        {"n_layers", c.n_layers},
      {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads},      {"head_dim", c.head_dim}, {"arch", arch_name(c.arch)}};
  json model = {{"id", model_id_}, {"object", "model"}, {"created", 0}, {"owned_by", "kvslim"}, {"meta", meta}};
  send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
}

void HttpServer::props(Response& res) {
  const json presses = press_catalogue();
  const CompressionOptions& c = options_.compression;
  const SamplerParams sampling;
  json settings = {{"n_ctx", options_.engine.context},
                   {"params",
                    {{"n_predict", options_.limits.default_max_tokens},
                     {"max_tokens_cap", options_.limits.max_tokens},
                     {"temperature", sampling.temperature},
                     {"top_k", sampling.top_k},
                     {"top_p", sampling.top_p},
                     {"min_p", sampling.min_p},
                     {"seed", sampling.seed},
                     {"press", c.press},
                     {"budget", c.budget ? json(*c.budget) : json(nullptr)},
                     {"ratio", c.ratio ? json(*c.ratio) : json(nullptr)},
                     {"press_options", c.press_options},
                     {"lookahead_adapter", c.default_adapter.empty() ? json(nullptr) : json(c.default_adapter)}}}};
  const ModelConfig& m = model_->config();
  json out = {{"default_generation_settings", settings},
              {"total_slots", options_.parallel},
              {"model_path", options_.model_path},
              {"model_alias", model_id_},
              {"model",
               {{"n_layers", m.n_layers},
                {"n_kv_heads", m.n_kv_heads},
                {"head_dim", m.head_dim},
                {"weights_in", residency_name(model_->file().residency())}}},
              {"system", system_info(m.head_dim)},
              {"chat_template", template_ ? json(template_->source()) : json(nullptr)},
              {"chat_template_error", template_error_.empty() ? json(nullptr) : json(template_error_)},
              {"kv_mem_mib", options_.kv_mem_mib},
              {"slot_save_path", !options_.slot_save_path.empty()},
              {"presses", presses}};
  send_json(res, 200, out);
}

std::string HttpServer::render_chat(const nlohmann::ordered_json& messages) const {
  if (!template_) throw RequestError(400, "messages", template_error_);
  try {
    return template_->render(messages, ChatTemplate::default_options(*model_));
  } catch (const Error& e) {
    throw RequestError(400, "messages", fmt::format("the chat template refused the messages: {}", e.what()));
  }
}

void HttpServer::tokenize(const Request& req, Response& res) {
  const auto body = parse_json_object(req.body);
  const auto content = get_string(body, "content", options_.max_body_bytes);
  if (!content) bad_field("content", "content is required (the text to tokenize)");
  const bool add_special = get_bool(body, "add_special").value_or(false);
  const bool parse_special = get_bool(body, "parse_special").value_or(true);
  const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
  const Tokenizer& tok = model_->tokenizer();
  const auto ids = tok.encode(*content, add_special && tok.add_bos_by_default(), parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
    else
      tokens.push_back(id);
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void HttpServer::detokenize(const Request& req, Response& res) {
  const auto body = parse_json_object(req.body);
  const auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) bad_field("tokens", "tokens must be a list of token ids");
  const int n_vocab = model_->config().n_vocab;
  std::vector<int32_t> ids;
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab)
      bad_field("tokens", "tokens must be ids in [0, {})", n_vocab);
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  send_json(res, 200, {{"content", model_->tokenizer().decode(ids)}});
}

void HttpServer::apply_template(const Request& req, Response& res) {
  const CompletionRequest r = parse_completion_request(req.body, true, options_.limits);
  send_json(res, 200, {{"prompt", render_chat(r.messages)}});
}

}  // namespace kvslim::server
