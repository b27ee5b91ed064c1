#include "server/openai_format.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <random>

#include "server/request_error.h"

namespace kvslim::server {

using json = nlohmann::json;

namespace {

double per_second(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(int(c));
  return out;
}

}  // namespace

CompletionIdentity new_identity(bool chat, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  CompletionIdentity id;
  id.chat = chat;
  id.id = fmt::format("{}-{:08x}{:06x}", chat ? "chatcmpl" : "cmpl", uint32_t(salt), uint32_t(++counter));
  id.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  id.model = model;
  return id;
}

std::string openai_finish_reason(const std::string& reason) { return reason == "stop" ? "stop" : "length"; }

json usage_json(const JobResult& r) {
  return {{"prompt_tokens", r.n_prompt},
          {"completion_tokens", r.n_generated},
          {"total_tokens", r.n_prompt + r.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", r.n_reused}}}};
}

json kv_json(const JobResult& r) {
  json kv = {{"press", r.press},
             {"budget", r.budget},
             {"kept_tokens", r.kept_tokens},
             {"score_ms", r.score_ms},
             {"bytes_peak", r.kv_bytes_peak},
             {"bytes_final", r.kv_bytes_final},
             {"bytes_full", r.kv_bytes_full},
             {"slot", r.slot},
             {"reused_tokens", r.n_reused}};
  if (!r.kv_layers.is_null()) kv["layers"] = r.kv_layers;
  if (!r.kv_map.is_null()) kv["map"] = r.kv_map;
  return kv;
}

json timings_json(const JobResult& r) {
  const int prefilled = r.n_prompt - r.n_reused;
  return {{"cache_n", r.n_reused},
          {"prompt_n", prefilled},
          {"prompt_ms", r.prefill_ms},
          {"prompt_per_second", per_second(prefilled, r.prefill_ms)},
          {"predicted_n", r.n_generated},
          {"predicted_ms", r.decode_ms},
          {"predicted_per_second", per_second(r.n_generated, r.decode_ms)},
          {"queue_ms", r.queue_ms}};
}

json logprobs_json(bool chat, const std::vector<TokenEvent>& events,
                   const std::function<std::string(int32_t)>& piece_of) {
  if (chat) {
    json content = json::array();
    for (const TokenEvent& e : events) {
      if (e.id < 0) continue;  // held-back text flushed at the end, not a token
      json top = json::array();
      for (const TokenLogprob& t : e.top) {
        const std::string piece = piece_of(t.id);
        top.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}});
      }
      content.push_back(
          {{"token", e.piece}, {"logprob", e.logprob}, {"bytes", bytes_of(e.piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  size_t offset = 0;
  for (const TokenEvent& e : events) {
    if (e.id < 0) continue;
    tokens.push_back(e.piece);
    token_logprobs.push_back(e.logprob);
    json top = json::object();
    for (const TokenLogprob& t : e.top) top[piece_of(t.id)] = t.logprob;
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += e.piece.size();
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json completion_json(const CompletionIdentity& id, const std::string& text, const JobResult& r, const json& logprobs,
                     const std::string& reasoning) {
  json choice = {{"index", 0}, {"finish_reason", openai_finish_reason(r.finish_reason)}, {"logprobs", logprobs}};
  if (id.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
  } else {
    choice["text"] = text;
  }
  return {{"id", id.id},
          {"object", id.chat ? "chat.completion" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(r)},
          {"kv", kv_json(r)},
          {"timings", timings_json(r)}};
}

json chunk_json(const CompletionIdentity& id, const std::string& text, bool first, const json& logprobs,
                const std::string& reasoning) {
  json choice = {{"index", 0}, {"finish_reason", nullptr}, {"logprobs", logprobs}};
  if (id.chat) {
    json delta = {{"content", text}};
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (first) delta["role"] = "assistant";
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", id.id},
          {"object", id.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"choices", json::array({choice})}};
}

json final_chunk_json(const CompletionIdentity& id, const JobResult& r) {
  json choice = {{"index", 0}, {"finish_reason", openai_finish_reason(r.finish_reason)}, {"logprobs", nullptr}};
  if (id.chat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  return {{"id", id.id},
          {"object", id.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", id.created},
          {"model", id.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(r)},
          {"kv", kv_json(r)},
          {"timings", timings_json(r)}};
}

json error_json(int status, const std::string& message, const std::string& param) {
  json error = {{"code", status}, {"message", message}, {"type", error_type(status)}};
  error["param"] = param.empty() ? json(nullptr) : json(param);
  return {{"error", error}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace kvslim::server
