// gpt-oss answers in OpenAI's harmony format: messages `<|start|>ROLE<|channel|>CHANNEL<|message|>
// TEXT<|end|>`, its reasoning in the "analysis" channel, the answer in "final" (a tool call's
// preamble in "commentary"). Decoded without its control tokens that is one run of words
// ("analysisThe user asks...assistantfinalHello"), so chat and the server follow the generated
// tokens with HarmonyChannels and keep the answer apart from the reasoning: chat shows the answer
// and the server returns the reasoning as `reasoning_content` (the field llama.cpp and DeepSeek's
// API use).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kvslim {

// The ids of harmony's control tokens in one vocabulary.
struct HarmonyTokens {
  int32_t start = -1, channel = -1, message = -1, end = -1, constrain = -1;

  // nullopt unless the vocabulary has <|start|>, <|channel|>, <|message|> and <|end|> as single
  // special tokens (<|constrain|> is optional).
  static std::optional<HarmonyTokens> find(const Tokenizer& tokenizer);
};

class HarmonyChannels {
 public:
  explicit HarmonyChannels(const HarmonyTokens& tokens) : t_(tokens) {}

  struct Text {
    std::string answer;     // the final or commentary channel, or text outside any message
    std::string reasoning;  // the analysis channel
  };
  // The text a generated token adds (empty for the control tokens and the message headers).
  Text push(int32_t token, const std::string& piece);

 private:
  // A chat prompt ends with "<|start|>assistant", so generation begins in a header; a model that
  // writes text before any <|channel|> or <|message|> still has it shown, as answer.
  enum class State { Answer, Role, ChannelName, Constraint, Message };
  HarmonyTokens t_;
  State state_ = State::Answer;
  std::string channel_;
  bool reasoning_ = false;
};

}  // namespace kvslim
