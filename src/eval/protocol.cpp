#include "eval/protocol.h"

#include "util/error.h"

namespace kvslim::eval {

const char* protocol_name(Protocol protocol) {
  return protocol == Protocol::QueryAware ? "query-aware" : "query-agnostic";
}

Protocol protocol_from_name(const std::string& name) {
  if (name == "query-aware") return Protocol::QueryAware;
  if (name == "query-agnostic") return Protocol::QueryAgnostic;
  fail("unknown protocol '{}' (valid: query-aware, query-agnostic)", name);
}

PromptTokens tokenize_prompt(const TaskSample& sample, const Tokenizer& tokenizer, Protocol protocol) {
  PromptTokens tokens;
  tokens.compressed = tokenizer.encode(sample.context, tokenizer.add_bos_by_default(), false);
  const std::vector<int32_t> query = tokenizer.encode(sample.question + sample.answer_prefix, false, false);
  std::vector<int32_t>& query_part = protocol == Protocol::QueryAware ? tokens.compressed : tokens.appended;
  query_part.insert(query_part.end(), query.begin(), query.end());
  if (tokens.compressed.empty()) fail("sample of task '{}' (seed {}) has an empty context", sample.task, sample.seed);
  return tokens;
}

const float* feed_prompt(Session& session, const PromptTokens& prompt) {
  const float* logits = session.prefill(prompt.compressed);
  return prompt.appended.empty() ? logits : session.extend(prompt.appended);
}

}  // namespace kvslim::eval
