// Chat templates: the Jinja source a model ships (GGUF `tokenizer.chat_template`) or a user's
// file, rendered by our own interpreter (src/chat/jinja/) in the environment Hugging Face uses:
// trim_blocks and lstrip_blocks on, loop controls, `tojson` = json.dumps(ensure_ascii=False),
// globals raise_exception(msg) and strftime_now(fmt). See docs/chat-templates.md.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvslim {

class Model;
class Tokenizer;
namespace gguf {
class File;
}
namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  // Extra template variables (a JSON object), e.g. {"tools": [...], "enable_thinking": false}.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  // The local time strftime_now() formats; empty: the system clock. Tests pin it.
  std::function<std::tm()> clock;
};

class ChatTemplate {
 public:
  // Parses Jinja source; `origin` names it in errors ("GGUF tokenizer.chat_template", a file path).
  // A syntax error throws kvslim::Error "ORIGIN line N: ...".
  static ChatTemplate parse(const std::string& source, const std::string& origin);
  // The model's template (GGUF tokenizer.chat_template), or the file at `override_path` when
  // non-empty; a model without one: kvslim::Error naming the --chat-template option.
  static ChatTemplate for_model(const Model& model, const std::string& override_path = "");
  // The same from a GGUF file alone (vocab-only files have no Model).
  static ChatTemplate for_file(const gguf::File& file, const std::string& override_path = "");
  // The file at `path`, origin named after it.
  static ChatTemplate from_path(const std::string& path);

  // BOS/EOS token text defaults from the model's tokenizer ("" when the vocabulary has none).
  static ChatTemplateOptions default_options(const Model& model);
  static ChatTemplateOptions default_options(const Tokenizer& tokenizer);

  std::string render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;
  // Messages as JSON objects (extra fields such as tool_calls or reasoning_content pass through).
  // Runtime errors (raise_exception, bad operations) throw kvslim::Error "ORIGIN line N: ...".
  std::string render(const nlohmann::json& messages, const ChatTemplateOptions& options) const;
  // Same, keeping the objects' key order (what `tojson` and `items` of a message then show).
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const;

  const std::string& source() const;
  const std::string& origin() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Template> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const jinja::Template> impl_;  // shared: copies are cheap and thread-safe to render
};

}  // namespace kvslim
