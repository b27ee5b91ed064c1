// Parsing and rendering a chat template: the Jinja interpreter and nothing of the model (where a
// template comes from is chat_template_sources.cpp), so the fuzz target links this alone.
#include "chat/chat_template.h"

#include "chat/jinja/json.h"
#include "chat/jinja/template.h"
#include "util/error.h"

namespace kvslim {

namespace {

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
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // The fuzz target (tests/fuzz/fuzz_chat_template.cpp): the same limits, reached in a millisecond
  // rather than a second, so that it tries a hundred times more inputs.
  const jinja::Limits limits{.max_steps = 100'000, .max_string_bytes = 1u << 20, .max_call_depth = 200};
#else
  const jinja::Limits limits;
#endif
  return impl.render(variables, options.clock, limits);
}

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& source, const std::string& origin) {
  return ChatTemplate(std::make_shared<const jinja::Template>(source, origin));
}

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
