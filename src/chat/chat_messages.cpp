#include "chat/chat_messages.h"

#include "util/error.h"

namespace kvslim {

nlohmann::ordered_json parse_chat_messages(const std::string& text, const std::string& origin) {
  nlohmann::ordered_json messages;
  try {
    messages = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number too large
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..." or
    // "[json.exception.out_of_range.406] number overflow parsing ..."
    std::string why = e.what();
    const size_t tag_end = why.find("] ");
    if (why.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos) why = why.substr(tag_end + 2);
    fail("{}: not valid JSON ({})", origin, why);
  }
  check_chat_messages(messages, origin);
  return messages;
}

void check_chat_messages(const nlohmann::ordered_json& messages, const std::string& origin) {
  if (!messages.is_array()) fail("{}: expected a JSON array of messages, got a {}", origin, messages.type_name());
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object()) fail("{}: message {} is a {}, not an object", origin, i + 1, m.type_name());
    const auto role = m.find("role");
    if (role == m.end()) fail("{}: message {} has no \"role\"", origin, i + 1);
    if (!role->is_string()) fail("{}: message {} has a \"role\" that is not a string", origin, i + 1);
    const auto content = m.find("content");
    if (content != m.end() && !content->is_string() && !content->is_null())
      fail("{}: message {} has a \"content\" that is neither a string nor null", origin, i + 1);
  }
}

}  // namespace kvslim
