// The JSON the OpenAI API answers with (chat.completion, text_completion, their streamed chunks,
// errors), plus kvslim's `kv` and `timings` objects on every completion.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/job.h"

namespace kvslim::server {

// Names one completion in every chunk and the final object.
struct CompletionIdentity {
  bool chat = false;
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

CompletionIdentity new_identity(bool chat, const std::string& model);

nlohmann::json usage_json(const JobResult& r);
nlohmann::json kv_json(const JobResult& r);
nlohmann::json timings_json(const JobResult& r);

// Log probabilities of `events` in the chat or the completions shape; `piece_of` gives a token's text.
nlohmann::json logprobs_json(bool chat, const std::vector<TokenEvent>& events,
                             const std::function<std::string(int32_t)>& piece_of);

// The whole answer (stream: false). A chat answer's `reasoning` (a harmony model's analysis
// channel), when there is any, is the message's `reasoning_content`, as llama.cpp returns it.
nlohmann::json completion_json(const CompletionIdentity& id, const std::string& text, const JobResult& r,
                               const nlohmann::json& logprobs, const std::string& reasoning = "");

// One streamed chunk with `text` (and the role on the first chat chunk; `reasoning` as the
// delta's `reasoning_content`); the last one carries the finish reason and usage, kv and timings.
nlohmann::json chunk_json(const CompletionIdentity& id, const std::string& text, bool first,
                          const nlohmann::json& logprobs, const std::string& reasoning = "");
nlohmann::json final_chunk_json(const CompletionIdentity& id, const JobResult& r);

// {"error": {"code", "message", "type", "param"}}.
nlohmann::json error_json(int status, const std::string& message, const std::string& param = "");

// Serialises for the wire: generated text may hold invalid UTF-8 (a character cut by max_tokens),
// which is replaced rather than throwing.
std::string dump(const nlohmann::json& j);

// "finish_reason" as OpenAI spells it ("stop" or "length").
std::string openai_finish_reason(const std::string& reason);

}  // namespace kvslim::server
