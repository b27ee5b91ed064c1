// Where a chat template comes from (the model's GGUF key tokenizer.chat_template, or a file) and
// the BOS/EOS text the model's tokenizer gives it.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
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

}  // namespace

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

}  // namespace kvslim
