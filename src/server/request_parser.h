// The bodies of /v1/chat/completions and /v1/completions: JSON text in, typed request out, or a
// RequestError naming the field. Pure (no model, no engine state), so the fuzz target can drive it
// with arbitrary bytes. Unknown fields are ignored, as OpenAI clients send many (user, n, ...).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"

namespace kvslim::server {

// What a request may ask for at most (the server's options).
struct RequestLimits {
  int max_tokens = 4096;  // cap on max_tokens
  int default_max_tokens = 256;
  size_t max_messages = 1024;
  size_t max_stop = 8;  // stop strings
  size_t max_stop_length = 256;
  int max_top_logprobs = 20;
  size_t max_prompt_ids = 1 << 20;  // token ids given as a list
};

struct CompletionRequest {
  bool chat = false;
  nlohmann::ordered_json messages;  // chat: [{role, content: string, ...}], content parts joined
  std::string prompt;               // completions: the text ...
  std::vector<int32_t> prompt_ids;  // ... or token ids (then prompt is empty)
  bool has_prompt_ids = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int max_tokens = 0;
  SamplerParams sampling;
  bool random_seed = false;  // seed -1 (llama.cpp): draw one
  std::vector<std::string> stop;
  int top_logprobs = 0;  // alternatives per token (n_probs)
  bool logprobs = false;
  std::string model;  // echoed back
  // Per-request compression: only the fields given; the server fills in its defaults.
  std::optional<std::string> press;
  std::optional<int64_t> budget;
  std::optional<double> ratio;
  std::optional<std::vector<std::string>> press_options;  // key=value
  bool kv_map = false;                                    // return the kept positions per (layer, KV head)
  bool return_tokens = false;                             // return the generated token ids (llama.cpp's field)
  bool add_special = true;                                // completions: prepend BOS when the tokenizer does
};

// Throws RequestError (400) for malformed JSON, invalid UTF-8, a wrong type, an out-of-range
// number or a missing prompt/messages. Sampling values are checked with SamplerParams::validate.
CompletionRequest parse_completion_request(const std::string& body, bool chat, const RequestLimits& limits);

// Parses a JSON object body (400 for anything else); shared by every POST endpoint.
nlohmann::ordered_json parse_json_object(const std::string& body);

// Typed field getters for JSON bodies: 400 naming `key` when the type or range is wrong.
std::optional<int64_t> get_int(const nlohmann::ordered_json& body, const std::string& key, int64_t min, int64_t max);
std::optional<double> get_number(const nlohmann::ordered_json& body, const std::string& key, double min, double max);
std::optional<bool> get_bool(const nlohmann::ordered_json& body, const std::string& key);
std::optional<std::string> get_string(const nlohmann::ordered_json& body, const std::string& key, size_t max_bytes);

// Rewrites an engine validation message that names a command-line flag ("--budget must be > 0")
// to name the request field instead ("budget must be > 0"), so one validation serves both.
std::string cli_flags_to_fields(const std::string& message);

}  // namespace kvslim::server
