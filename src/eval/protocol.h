// The two evaluation protocols (as kvpress): how a sample's prompt reaches a compressed cache.
// query-aware: context + question + answer_prefix are prefilled together with the press, which
// evicts at the end of prefill (the question can guide the selection). query-agnostic: only the
// context is prefilled with the press; question + answer_prefix are then appended uncompressed
// (Session::extend), as when one compressed context serves many later questions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session.h"
#include "tasks/task.h"
#include "tokenizer/tokenizer.h"

namespace kvslim::eval {

// multi-turn: the context and the first of a sample's turns (TaskSample::turns) are prefilled
// with the press, the answer generated, then each later question follows in the same session
// (LiveSession: the method's multi-turn rule runs at each turn), one record per turn.
enum class Protocol { QueryAware, QueryAgnostic, MultiTurn };

const char* protocol_name(Protocol protocol);
// "query-aware" or "query-agnostic"; throws kvslim::Error naming the valid ones.
Protocol protocol_from_name(const std::string& name);

// A prompt's tokens as the protocol feeds them: `compressed` with the press, then `appended`
// uncompressed (empty under query-aware).
struct PromptTokens {
  std::vector<int32_t> compressed, appended;
  int64_t size() const { return int64_t(compressed.size() + appended.size()); }
};

// The context (with BOS when the tokenizer adds one) and question + answer_prefix (without)
// are tokenized separately under both protocols, so that both feed the model the same tokens.
PromptTokens tokenize_prompt(const tasks::TaskSample& sample, const Tokenizer& tokenizer, Protocol protocol);

// Prefills the compressed part (the press evicts at its end), then extends with the appended
// part; returns the last prompt token's logits.
const float* feed_prompt(Session& session, const PromptTokens& prompt);

}  // namespace kvslim::eval
