#include "server/request_parser.h"

#include <cmath>
#include <limits>
#include <utility>

#include "server/request_error.h"
#include "util/error.h"

namespace kvslim::server {

using json = nlohmann::ordered_json;

namespace {

const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a non-integer number";
    default: return "a number";
  }
}

// A present, non-null field (OpenAI clients send null for "not set").
const json* field(const json& body, const std::string& key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string press_option_text(const std::string& key, const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return value.dump();
  bad_field("press_options", "press_options.{} must be a string, number or boolean (got {})", key, type_name(value));
}

// Message content: a string, or OpenAI's list of parts of which only text parts are supported.
std::string message_content(const json& content, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_field(param, "{} must be a string or a list of text parts (got {})", param, type_name(content));
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad_field(param, "{}: only parts {{\"type\": \"text\", \"text\": \"...\"}} are supported", param);
    text += part["text"].get<std::string>();
  }
  return text;
}

json parse_messages(const json& body, const RequestLimits& limits) {
  const json* messages = field(body, "messages");
  if (!messages) bad_field("messages", "messages is required (a list of {{\"role\", \"content\"}} objects)");
  if (!messages->is_array() || messages->empty())
    bad_field("messages", "messages must be a non-empty list of {{\"role\", \"content\"}} objects");
  if (messages->size() > limits.max_messages)
    bad_field("messages", "messages has {} entries, more than the limit of {}", messages->size(), limits.max_messages);
  json out = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object()) bad_field("messages", "messages[{}] must be an object (got {})", i, type_name(m));
    const json* role = field(m, "role");
    if (!role || !role->is_string() || role->get<std::string>().empty())
      bad_field(fmt::format("messages[{}].role", i), "messages[{}].role must be a non-empty string", i);
    json copy = m;  // extra fields (name, tool_calls, ...) pass through to the template
    const json* content = field(m, "content");
    copy["content"] = content ? message_content(*content, i) : std::string();
    out.push_back(std::move(copy));
  }
  return out;
}

void parse_prompt(const json& body, const RequestLimits& limits, CompletionRequest& r) {
  const json* prompt = field(body, "prompt");
  if (!prompt) bad_field("prompt", "prompt is required (a string or a list of token ids)");
  if (prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
    return;
  }
  if (!prompt->is_array())
    bad_field("prompt", "prompt must be a string or a list of token ids (got {})", type_name(*prompt));
  if (prompt->size() == 1 && (*prompt)[0].is_string()) {  // a batch of one prompt
    r.prompt = (*prompt)[0].get<std::string>();
    return;
  }
  if (prompt->size() > limits.max_prompt_ids)
    bad_field("prompt", "prompt has more than {} token ids", limits.max_prompt_ids);
  r.has_prompt_ids = true;
  for (const json& id : *prompt) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad_field("prompt",
                "prompt must be one string or a list of non-negative token ids (batches of several prompts are not "
                "supported)");
    r.prompt_ids.push_back(int32_t(id.get<int64_t>()));
  }
}

void parse_stop(const json& body, const RequestLimits& limits, CompletionRequest& r) {
  const json* stop = field(body, "stop");
  if (!stop) return;
  std::vector<std::string> out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const json& s : *stop) {
      if (!s.is_string()) bad_field("stop", "stop must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_field("stop", "stop must be a string or a list of strings (got {})", type_name(*stop));
  }
  if (out.size() > limits.max_stop)
    bad_field("stop", "stop has {} strings, more than the limit of {}", out.size(), limits.max_stop);
  for (const std::string& s : out) {
    if (s.empty()) bad_field("stop", "stop strings must not be empty");
    if (s.size() > limits.max_stop_length)
      bad_field("stop", "a stop string has {} bytes, more than the limit of {}", s.size(), limits.max_stop_length);
  }
  r.stop = std::move(out);
}

void parse_sampling(const json& body, CompletionRequest& r) {
  SamplerParams& s = r.sampling;
  if (auto v = get_number(body, "temperature", 0, 100)) s.temperature = float(*v);
  if (auto v = get_number(body, "top_p", 0, 1)) s.top_p = float(*v);
  if (auto v = get_int(body, "top_k", 0, 1 << 30)) s.top_k = int(*v);
  if (auto v = get_number(body, "min_p", 0, 1)) s.min_p = float(*v);
  if (auto v = get_number(body, "repeat_penalty", 0, 100)) s.repeat_penalty = float(*v);
  if (auto v = get_int(body, "repeat_last_n", 0, 1 << 30)) s.repeat_last_n = int(*v);
  if (const json* seed = field(body, "seed")) {
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer() && seed->get<int64_t>() == -1) {
      r.random_seed = true;
    } else {
      bad_field("seed", "seed must be an integer in [0, 2^64) or -1 for a random one");
    }
  }
  try {
    s.validate();
  } catch (const Error& e) {
    bad_field("sampling", "{}", cli_flags_to_fields(e.what()));
  }
}

void parse_compression(const json& body, CompletionRequest& r) {
  r.press = get_string(body, "press", 256);
  if (auto v = get_int(body, "budget", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    r.budget = *v;
  if (auto v = get_number(body, "ratio", -std::numeric_limits<double>::max(), std::numeric_limits<double>::max()))
    r.ratio = *v;
  if (r.budget && r.ratio) bad_field("budget", "give budget or ratio, not both");
  if (const json* options = field(body, "press_options")) {
    if (!options->is_object())
      bad_field("press_options", "press_options must be an object of method options (got {})", type_name(*options));
    std::vector<std::string> key_values;
    for (const auto& [key, value] : options->items()) key_values.push_back(key + "=" + press_option_text(key, value));
    r.press_options = std::move(key_values);
  }
  r.kv_map = get_bool(body, "kv_map").value_or(false);
  r.return_tokens = get_bool(body, "return_tokens").value_or(false);
}

}  // namespace

json parse_json_object(const std::string& body) {
  json parsed;
  try {
    // nlohmann's lexer rejects invalid UTF-8 in strings, and the depth of nesting is what the body
    // size allows (its parser is not recursive).
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    throw RequestError(400, "", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!parsed.is_object())
    throw RequestError(400, "", fmt::format("the body must be a JSON object (got {})", type_name(parsed)));
  return parsed;
}

std::optional<int64_t> get_int(const json& body, const std::string& key, int64_t min, int64_t max) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(max)) bad_field(key, "{} must be an integer in [{}, {}] (got {})", key, min, max, u);
    return int64_t(u);
  }
  if (!v->is_number_integer())
    bad_field(key, "{} must be an integer in [{}, {}] (got {})", key, min, max, type_name(*v));
  const int64_t i = v->get<int64_t>();
  if (i < min || i > max) bad_field(key, "{} must be an integer in [{}, {}] (got {})", key, min, max, i);
  return i;
}

std::optional<double> get_number(const json& body, const std::string& key, double min, double max) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(key, "{} must be a number in [{}, {}] (got {})", key, min, max, type_name(*v));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max)
    bad_field(key, "{} must be a number in [{}, {}] (got {})", key, min, max, d);
  return d;
}

std::optional<bool> get_bool(const json& body, const std::string& key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(key, "{} must be true or false (got {})", key, type_name(*v));
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& body, const std::string& key, size_t max_bytes) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_field(key, "{} must be a string (got {})", key, type_name(*v));
  std::string s = v->get<std::string>();
  if (s.size() > max_bytes) bad_field(key, "{} has {} bytes, more than the limit of {}", key, s.size(), max_bytes);
  return s;
}

std::string cli_flags_to_fields(const std::string& message) {
  static const std::pair<const char*, const char*> names[] = {{"--budget", "budget"},
                                                              {"--ratio", "ratio"},
                                                              {"--press-opt", "press_options"},
                                                              {"--press", "press"},
                                                              {"--temp", "temperature"},
                                                              {"--top-p", "top_p"},
                                                              {"--top-k", "top_k"},
                                                              {"--min-p", "min_p"},
                                                              {"--repeat-penalty", "repeat_penalty"},
                                                              {"--repeat-last-n", "repeat_last_n"},
                                                              {"--ctx", "the server's --ctx"}};
  std::string out = message;
  for (const auto& [flag, name] : names) {
    const std::string f = flag;
    for (size_t at = out.find(f); at != std::string::npos; at = out.find(f, at)) {
      // Only whole flags: "--press" must not rewrite the start of "--press-opt".
      const size_t end = at + f.size();
      if (end < out.size() && (std::isalnum(static_cast<unsigned char>(out[end])) || out[end] == '-')) {
        at = end;
        continue;
      }
      out.replace(at, f.size(), name);
      at += std::char_traits<char>::length(name);
    }
  }
  return out;
}

CompletionRequest parse_completion_request(const std::string& body, bool chat, const RequestLimits& limits) {
  const json parsed = parse_json_object(body);
  CompletionRequest r;
  r.chat = chat;
  if (chat) {
    r.messages = parse_messages(parsed, limits);
  } else {
    parse_prompt(parsed, limits, r);
    r.add_special = get_bool(parsed, "add_special").value_or(true);
  }
  r.model = get_string(parsed, "model", 256).value_or("");
  r.stream = get_bool(parsed, "stream").value_or(false);
  if (const json* options = field(parsed, "stream_options")) {
    if (!options->is_object()) bad_field("stream_options", "stream_options must be an object");
    r.include_usage = get_bool(*options, "include_usage").value_or(false);
  }
  // max_completion_tokens is the newer OpenAI name; n_predict llama.cpp's.
  std::optional<int64_t> max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"})
    if (auto v = get_int(parsed, key, 0, limits.max_tokens)) max_tokens = v;
  r.max_tokens = int(max_tokens.value_or(std::min(limits.default_max_tokens, limits.max_tokens)));
  get_int(parsed, "n", 1, 1);  // one choice per request
  parse_sampling(parsed, r);
  parse_stop(parsed, limits, r);
  parse_compression(parsed, r);

  // Log probabilities: chat has logprobs (bool) + top_logprobs; completions logprobs (int);
  // llama.cpp's n_probs works for both.
  if (chat) {
    r.logprobs = get_bool(parsed, "logprobs").value_or(false);
    if (auto k = get_int(parsed, "top_logprobs", 0, limits.max_top_logprobs)) r.top_logprobs = int(*k);
    if (r.top_logprobs > 0 && !r.logprobs) bad_field("top_logprobs", "top_logprobs needs logprobs: true");
  } else if (auto k = get_int(parsed, "logprobs", 0, limits.max_top_logprobs)) {
    r.logprobs = true;
    r.top_logprobs = int(*k);
  }
  if (auto k = get_int(parsed, "n_probs", 0, limits.max_top_logprobs); k && *k > 0) {
    r.logprobs = true;
    r.top_logprobs = int(*k);
  }
  return r;
}

}  // namespace kvslim::server
