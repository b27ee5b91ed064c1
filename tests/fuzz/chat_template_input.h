// How the chat-template fuzz target reads its input, shared with the test that replays the seed
// corpus (tests/test_fuzz_corpora.cpp): a template, then optionally the line `<<<messages>>>` and
// the conversation as JSON (an array of messages, or an object with "messages", "variables" and
// "add_generation_prompt"); without the separator, a fixed four-message conversation.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_messages.h"
#include "chat/chat_template.h"

namespace kvslim::fuzz {

inline constexpr std::string_view kMessagesSeparator = "\n<<<messages>>>\n";

// Parses and renders; throws kvslim::Error for a bad template or conversation (as the CLI and
// the server would refuse them).
inline std::string render_fuzz_input(std::string_view input) {
  const size_t cut = input.find(kMessagesSeparator);
  const std::string source(input.substr(0, cut));
  const std::string conversation =
      cut == std::string_view::npos
          ? R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
            R"( {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Why?"}])"
          : std::string(input.substr(cut + kMessagesSeparator.size()));

  ChatTemplateOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.clock = [] {  // strftime_now() renders the same on every run
    std::tm t{};
    t.tm_year = 126, t.tm_mon = 10, t.tm_mday = 27, t.tm_hour = 12;
    return t;
  };
  nlohmann::ordered_json messages;
  // The conversation is checked as the CLI's messages files and the server's bodies are, before a
  // template sees it.
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(conversation, nullptr, false);
  if (parsed.is_object()) {
    if (parsed.contains("variables")) options.variables = parsed["variables"];
    if (parsed.contains("add_generation_prompt") && parsed["add_generation_prompt"].is_boolean())
      options.add_generation_prompt = parsed["add_generation_prompt"].get<bool>();
    messages = parsed.contains("messages") ? parsed["messages"] : nlohmann::ordered_json::array();
    check_chat_messages(messages, "fuzz");
  } else {
    messages = parse_chat_messages(conversation, "fuzz");
  }
  return ChatTemplate::parse(source, "fuzz.jinja").render(messages, options);
}

}  // namespace kvslim::fuzz
