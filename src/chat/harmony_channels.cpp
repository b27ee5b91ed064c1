#include "chat/harmony_channels.h"

#include <vector>

namespace kvslim {

std::optional<HarmonyTokens> HarmonyTokens::find(const Tokenizer& tokenizer) {
  const auto id_of = [&](const char* text) {
    const std::vector<int32_t> ids = tokenizer.encode(text, /*add_bos=*/false, /*parse_special=*/true);
    return ids.size() == 1 && tokenizer.token_to_piece(ids[0]).empty() ? ids[0] : -1;
  };
  HarmonyTokens t;
  t.start = id_of("<|start|>");
  t.channel = id_of("<|channel|>");
  t.message = id_of("<|message|>");
  t.end = id_of("<|end|>");
  t.constrain = id_of("<|constrain|>");
  if (t.start < 0 || t.channel < 0 || t.message < 0 || t.end < 0) return std::nullopt;
  return t;
}

HarmonyChannels::Text HarmonyChannels::push(int32_t token, const std::string& piece) {
  if (token == t_.start) {
    state_ = State::Role;
    channel_.clear();
    return {};
  }
  if (token == t_.channel) {
    state_ = State::ChannelName;
    channel_.clear();
    return {};
  }
  if (token == t_.constrain) {
    state_ = State::Constraint;
    return {};
  }
  if (token == t_.message) {
    // "analysis", or "commentary to=functions.get_weather": the channel is the first word.
    reasoning_ = channel_.substr(0, channel_.find(' ')) == "analysis";
    state_ = State::Message;
    return {};
  }
  if (token == t_.end) {
    state_ = State::Answer;
    return {};
  }
  switch (state_) {
    case State::ChannelName: channel_ += piece; return {};
    case State::Role:
    case State::Constraint: return {};
    case State::Message:
      if (reasoning_) return {"", piece};
      return {piece, ""};
    case State::Answer: return {piece, ""};
  }
  return {};
}

}  // namespace kvslim
