#include "chat/chat_template.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "chat/jinja/json.h"
#include "chat/jinja/template.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvslim {

namespace {

constexpr const char* kTemplateKey = "tokenizer.chat_template";

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read chat template {}: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read chat template {}", path);
  return text.str();
}

template <class Json>
std::string render_json(const jinja::Template& impl, const Json& messages, const ChatTemplateOptions& options) {
  if (!messages.is_array()) fail("{}: messages must be a JSON array", impl.origin());
  for (size_t i = 0; i < messages.size(); ++i)
    if (!messages[i].is_object()) fail("{}: message {} is not a JSON object", impl.origin(), i);
  std::vector<std::pair<std::string, jinja::Value>> variables;
  // Caller-supplied extras first, so the four standard names cannot be overridden by accident.
  if (!options.variables.is_null()) {
    if (!options.variables.is_object()) fail("{}: template variables must be a JSON object", impl.origin());
    for (auto it = options.variables.begin(); it != options.variables.end(); ++it)
      variables.emplace_back(it.key(), jinja::from_json(it.value()));
  }
  variables.emplace_back("messages", jinja::from_json(messages));
  variables.emplace_back("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  variables.emplace_back("bos_token", jinja::Value::string(options.bos_token));
  variables.emplace_back("eos_token", jinja::Value::string(options.eos_token));
  return impl.render(variables, options.clock);
}

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& source, const std::string& origin) {
  return ChatTemplate(std::make_shared<const jinja::Template>(source, origin));
}

ChatTemplate ChatTemplate::from_path(const std::string& path) { return parse(read_template_file(path), path); }

ChatTemplate ChatTemplate::for_file(const gguf::File& file, const std::string& override_path) {
  if (!override_path.empty()) return from_path(override_path);
  const auto source = file.get_string_opt(kTemplateKey);
  if (!source)
    fail("{} has no chat template (no {} key); give one with --chat-template FILE", file.path(), kTemplateKey);
  return parse(*source, std::string("GGUF ") + kTemplateKey);
}

ChatTemplate ChatTemplate::for_model(const Model& model, const std::string& override_path) {
  return for_file(model.file(), override_path);
}

ChatTemplateOptions ChatTemplate::default_options(const Tokenizer& tokenizer) {
  ChatTemplateOptions options;
  if (tokenizer.bos_id() >= 0) options.bos_token = tokenizer.token_to_piece(tokenizer.bos_id(), true);
  if (tokenizer.eos_id() >= 0) options.eos_token = tokenizer.token_to_piece(tokenizer.eos_id(), true);
  return options;
}

ChatTemplateOptions ChatTemplate::default_options(const Model& model) { return default_options(model.tokenizer()); }

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return render(list, options);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const ChatTemplateOptions& options) const {
  return render_json(*impl_, messages, options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const {
  return render_json(*impl_, messages, options);
}

const std::string& ChatTemplate::source() const { return impl_->source(); }
const std::string& ChatTemplate::origin() const { return impl_->origin(); }

}  // namespace kvslim
