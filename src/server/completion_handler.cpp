// POST /v1/chat/completions and /v1/completions (answered whole or as server-sent events) and
// POST /slots/{id}: the handlers that hand work to the scheduler.
#include <httplib.h>

#include <filesystem>
#include <random>

#include "model/model.h"
#include "press/registry.h"
#include "server/client_connection.h"
#include "server/http_server.h"
#include "server/openai_format.h"
#include "server/request_error.h"
#include "server/scheduler.h"
#include "server/slot_files.h"
#include "util/error.h"

namespace kvslim::server {

using json = nlohmann::json;
using httplib::Request;
using httplib::Response;

namespace {

// How often a waiting handler checks that its client is still connected.
constexpr std::chrono::milliseconds kLivenessPoll{100};

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// Event log of one streamed completion, shared by the content provider's calls.
struct Stream {
  std::shared_ptr<GenerationJob> job;
  CompletionIdentity id;
  const Tokenizer* tokenizer = nullptr;
  bool include_usage = false;
  bool first = true;
};

// The whole answer as one JSON response, once the job is done (or 499 when the client left).
void answer_whole(const CompletionRequest& r, GenerationJob& job, const CompletionIdentity& id, const Tokenizer& tok,
                  const ClientConnection& connection, Response& res) {
  std::unique_lock lock(job.mutex);
  while (!job.cv.wait_for(lock, kLivenessPoll, [&] { return job.done; }))
    if (connection.closed()) {
      // Nobody will read the answer: stop generating it (the slot finishes at its next step,
      // even half-way through a prompt) and leave without waiting for that.
      job.cancelled = true;
      // Never delivered; it labels the request in /metrics (nginx's "client closed request").
      send_json(res, 499, error_json(499, "the client closed the connection; the request was cancelled"));
      return;
    }
  if (job.error) throw RequestError(500, "", fmt::format("generation failed: {}", *job.error));
  std::string text, reasoning;
  std::vector<TokenEvent> events(job.events.begin(), job.events.end());
  for (const TokenEvent& e : events) {
    text += e.text;
    reasoning += e.reasoning;
  }
  const json logprobs =
      r.logprobs ? logprobs_json(r.chat, events, [&](int32_t t) { return tok.token_to_piece(t); }) : json(nullptr);
  json out = completion_json(id, text, job.result, logprobs, reasoning);
  if (r.return_tokens) {
    out["tokens"] = json::array();
    for (const TokenEvent& e : events)
      if (e.id >= 0) out["tokens"].push_back(e.id);
  }
  send_json(res, 200, out);
}

// The answer as server-sent events, written by httplib's content provider as the slot produces
// tokens: one chunk per token, then the final chunk (and usage), then [DONE].
void answer_streamed(const CompletionRequest& r, std::shared_ptr<GenerationJob> job, const CompletionIdentity& id,
                     const Tokenizer& tok, std::shared_ptr<ClientConnection> connection, Response& res) {
  auto stream = std::make_shared<Stream>();
  stream->job = job;
  stream->id = id;
  stream->tokenizer = &tok;
  stream->include_usage = r.include_usage;
  const bool logprobs = r.logprobs, chat = r.chat;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream, logprobs, chat, connection](size_t, httplib::DataSink& sink) {
        GenerationJob& j = *stream->job;
        auto write = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          j.cancelled = true;  // the client went away: stop generating for it
          return false;
        };
        std::deque<TokenEvent> events;
        bool done = false;
        {
          std::unique_lock lock(j.mutex);
          j.cv.wait_for(lock, kLivenessPoll, [&] { return !j.events.empty() || j.done; });
          events.swap(j.events);
          done = j.done;
        }
        // Nothing to write yet (a long prompt being prefilled) does not hide a client that left.
        if (events.empty() && !done && connection->closed()) {
          j.cancelled = true;
          return false;
        }
        for (const TokenEvent& e : events) {
          if (e.text.empty() && e.reasoning.empty() && !logprobs) continue;
          const json lp =
              logprobs && e.id >= 0
                  ? logprobs_json(chat, {e}, [&](int32_t t) { return stream->tokenizer->token_to_piece(t); })
                  : json(nullptr);
          if (!write(sse(chunk_json(stream->id, e.text, stream->first, lp, e.reasoning)))) return false;
          stream->first = false;
        }
        if (!done) return true;
        if (j.error) {
          if (!write(sse(error_json(500, "generation failed: " + *j.error)))) return false;
        } else {
          if (!write(sse(final_chunk_json(stream->id, j.result)))) return false;
          if (stream->include_usage) {
            json usage = final_chunk_json(stream->id, j.result);
            usage["choices"] = json::array();
            if (!write(sse(usage))) return false;
          }
        }
        if (!write("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

}  // namespace

std::vector<int32_t> HttpServer::prompt_tokens(const CompletionRequest& r) const {
  const Tokenizer& tok = model_->tokenizer();
  std::vector<int32_t> ids;
  if (r.chat) {
    const std::string text = render_chat(r.messages);
    // A template that writes the BOS text itself gets no second BOS.
    const int32_t bos = tok.bos_id();
    const std::string bos_text = bos >= 0 ? tok.token_to_piece(bos, true) : std::string();
    const bool has_bos = !bos_text.empty() && text.rfind(bos_text, 0) == 0;
    ids = tok.encode(text, tok.add_bos_by_default() && !has_bos, true);
  } else if (r.has_prompt_ids) {
    ids = r.prompt_ids;
  } else {
    ids = tok.encode(r.prompt, tok.add_bos_by_default() && r.add_special, true);
  }
  try {
    validate_prompt(*model_, options_.engine, ids);
  } catch (const Error& e) {
    throw RequestError(400, r.chat ? "messages" : "prompt", cli_flags_to_fields(e.what()));
  }
  return ids;
}

CompressionOptions HttpServer::compression_for(const CompletionRequest& r) const {
  CompressionOptions c = options_.compression;
  if (r.press && *r.press != c.press) {
    c.press = *r.press;
    c.press_options.clear();  // the server's options belong to its own method
  }
  if (r.press_options) {
    for (const std::string& kv : *r.press_options) {
      const std::string key = kv.substr(0, kv.find('='));
      // Options that name files would let a client read any file the server can.
      if (key == "adapter" || kv.find("adapter=") != std::string::npos)
        bad_field("press_options",
                  "press_options.{}: a request cannot name files; start the server with "
                  "--lookahead-adapter FILE instead",
                  key);
      std::erase_if(c.press_options, [&](const std::string& o) { return o.substr(0, o.find('=')) == key; });
      c.press_options.push_back(kv);
    }
  }
  if (r.budget || r.ratio) {
    c.budget = r.budget;
    c.ratio = r.ratio;
  }
  // The CLI's validation, with its messages naming the request fields; the steps of
  // CompressionOptions::prepare, one at a time, so that each error names its field.
  try {
    c.validate();
  } catch (const Error& e) {
    bad_field(r.ratio ? "ratio" : "budget", "{}", cli_flags_to_fields(e.what()));
  }
  try {
    c.spec();
  } catch (const Error& e) {
    bad_field("press", "{}", cli_flags_to_fields(e.what()));
  }
  // The server's --prefill-evict block applies to the methods that have block-wise eviction; a
  // request choosing another method (full, ...) evicts at the end of its prompt as usual.
  c = c.with_block_eviction_where_supported();
  // A method that takes an adapter file (lookaheadkv) runs with the server's: the one beside the
  // model or --lookahead-adapter. Without one, the refusal says how to start the server.
  if (c.lacks_adapter())
    bad_field("press",
              "{} needs an adapter file and this server has none ({} does not exist); start the server "
              "with --lookahead-adapter FILE, or put the adapter there",
              c.press, c.adapter_sought);
  std::unique_ptr<Press> press;
  try {
    press = c.make_press();
  } catch (const Error& e) {
    bad_field("press_options", "{}", cli_flags_to_fields(e.what()));
  }
  try {
    if (c.budget) press->check_budget(*c.budget);
  } catch (const Error& e) {
    bad_field("budget", "{}", cli_flags_to_fields(e.what()));
  }
  return c;
}

void HttpServer::completions(const Request& req, Response& res, bool chat) {
  const CompletionRequest r = parse_completion_request(req.body, chat, options_.limits);
  auto job = std::make_shared<GenerationJob>();
  job->compression = compression_for(r);
  job->prompt = prompt_tokens(r);
  job->n_predict = r.max_tokens;
  job->sampling = r.sampling;
  if (r.random_seed) job->sampling.seed = std::random_device{}();
  job->stop = r.stop;
  job->logprobs = r.logprobs;
  job->top_logprobs = r.top_logprobs;
  job->kv_map = r.kv_map;
  job->split_reasoning = r.chat;
  if (scheduler_->submit(job) == Scheduler::Submitted::queue_full)
    throw RequestError(503, "", "the server is busy: every slot is taken and the queue is full; retry later");

  const CompletionIdentity id = new_identity(chat, r.model.empty() ? model_id_ : r.model);
  // The client's socket, watched while the answer is made: a client that leaves cancels its job.
  auto connection =
      std::make_shared<ClientConnection>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  if (r.stream)
    answer_streamed(r, std::move(job), id, model_->tokenizer(), std::move(connection), res);
  else
    answer_whole(r, *job, id, model_->tokenizer(), *connection, res);
}

void HttpServer::slot_action(const Request& req, Response& res) {
  const int id = std::stoi(req.matches[1].str());
  const std::string action = req.get_param_value("action");
  if (action == "erase") {
    send_json(res, 200, scheduler_->with_idle_slot(id, [&](Slot& slot) {
      const size_t n = slot.tokens().size();
      slot.reset();
      return json{{"id_slot", id}, {"n_erased", n}};
    }));
    return;
  }
  if (action != "save" && action != "restore")
    bad_field("action", "action must be save, restore or erase (got '{}')", action);
  const auto body = parse_json_object(req.body);
  const auto filename = get_string(body, "filename", 1024);
  if (!filename) bad_field("filename", "filename is required (a file name inside --slot-save-path)");
  const auto path = slot_file_path(options_.slot_save_path, *filename);
  json out = scheduler_->with_idle_slot(id, [&](Slot& slot) {
    if (action == "save") {
      if (slot.tokens().empty()) throw RequestError(400, "id", fmt::format("slot {} holds nothing to save", id));
      return slot.save(path.string());
    }
    if (!std::filesystem::exists(path))
      throw RequestError(404, "filename", fmt::format("no file '{}' in --slot-save-path", *filename));
    return slot.restore(path.string());
  });
  out["filename"] = *filename;
  send_json(res, 200, out);
}

}  // namespace kvslim::server
