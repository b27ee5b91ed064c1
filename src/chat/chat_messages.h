// A conversation as JSON ([{"role": ..., "content": ...}, ...]) read from user input, checked
// before a template sees it so that a malformed file gets one clear line, not a template error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvslim {

// Parses and checks `text`: a JSON array of objects, each with a string "role" and a "content"
// that is a string, null or absent (tool-call turns); other fields pass through in order.
// Throws kvslim::Error naming `origin` and the message at fault.
nlohmann::ordered_json parse_chat_messages(const std::string& text, const std::string& origin);

// The same checks on an already parsed value.
void check_chat_messages(const nlohmann::ordered_json& messages, const std::string& origin);

}  // namespace kvslim
