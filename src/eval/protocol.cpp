#include "eval/protocol.h"

#include "util/error.h"

namespace kvslim::eval {

const char* protocol_name(Protocol protocol) {
  switch (protocol) {
    case Protocol::QueryAware: return "query-aware";
    case Protocol::QueryAgnostic: return "query-agnostic";
    case Protocol::MultiTurn: break;
  }
  return "multi-turn";
}

Protocol protocol_from_name(const std::string& name) {
  if (name == "query-aware") return Protocol::QueryAware;
  if (name == "query-agnostic") return Protocol::QueryAgnostic;
  if (name == "multi-turn") return Protocol::MultiTurn;
  fail("unknown protocol '{}' (valid: query-aware, query-agnostic, multi-turn)", name);
}

PromptTokens tokenize_prompt(const tasks::TaskSample& sample, const Tokenizer& tokenizer, Protocol protocol) {
  PromptTokens tokens;
  tokens.compressed = tokenizer.encode(sample.context, tokenizer.add_bos_by_default(), false);
  const std::vector<int32_t> query = tokenizer.encode(sample.question + sample.answer_prefix, false, false);
  // Multi-turn runs its own turns (run_multi_turn); these tokens serve its sizing only.
  std::vector<int32_t>& query_part = protocol == Protocol::QueryAgnostic ? tokens.appended : tokens.compressed;
  query_part.insert(query_part.end(), query.begin(), query.end());
  if (tokens.compressed.empty()) fail("sample of task '{}' (seed {}) has an empty context", sample.task, sample.seed);
  return tokens;
}

const float* feed_prompt(Session& session, const PromptTokens& prompt) {
  const float* logits = session.prefill(prompt.compressed);
  return prompt.appended.empty() ? logits : session.extend(prompt.appended);
}

}  // namespace kvslim::eval
