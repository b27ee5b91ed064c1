// kvslim apply-template: renders a conversation with a model's chat template (or a template
// file) and prints the result byte for byte, without a trailing newline.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "chat/chat_messages.h"
#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/prompt_input.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvslim::cli {

void add_apply_template_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string template_file;
    std::string messages;
    bool no_generation_prompt = false;
    std::string bos, eos;
    std::string vars;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("apply-template", "render a conversation with a chat template (printed exactly)");
  cmd->add_option("-m,--model", opt->model,
                  "GGUF file whose tokenizer.chat_template and BOS/EOS are used (vocab-only files too)");
  cmd->add_option("--template,--chat-template", opt->template_file, "Jinja template file (instead of the model's)");
  cmd->add_option("--messages", opt->messages, "JSON file: [{\"role\": ..., \"content\": ...}, ...] (- for stdin)")
      ->required();
  cmd->add_flag("--no-generation-prompt", opt->no_generation_prompt, "do not open the assistant's turn at the end");
  auto* bos = cmd->add_option("--bos-token", opt->bos, "BOS token text (default: the model's, else empty)");
  auto* eos = cmd->add_option("--eos-token", opt->eos, "EOS token text (default: the model's, else empty)");
  cmd->add_option("--vars", opt->vars,
                  "extra template variables as a JSON object, e.g. '{\"tools\": [...], \"enable_thinking\": false}'");
  cmd->callback([opt, bos, eos] {
    if (opt->model.empty() && opt->template_file.empty())
      fail("give a model with -m MODEL or a template with --template FILE");
    // Read the messages first: a bad file is reported before any model is opened.
    const auto messages = parse_chat_messages(read_bytes(opt->messages, "messages file"),
                                              opt->messages == "-" ? std::string("messages (stdin)") : opt->messages);
    ChatTemplateOptions options;
    std::optional<ChatTemplate> tmpl;
    if (!opt->model.empty()) {
      const gguf::File file = gguf::File::open(opt->model);
      tmpl = ChatTemplate::for_file(file, opt->template_file);
      options = ChatTemplate::default_options(Tokenizer::from_gguf(file));
    } else {
      tmpl = ChatTemplate::from_path(opt->template_file);
    }
    options.add_generation_prompt = !opt->no_generation_prompt;
    if (bos->count()) options.bos_token = opt->bos;
    if (eos->count()) options.eos_token = opt->eos;
    if (!opt->vars.empty()) {
      try {
        options.variables = nlohmann::ordered_json::parse(opt->vars);
      } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range (number too large)
        fail("--vars: not valid JSON");
      }
      if (!options.variables.is_object()) fail("--vars: expected a JSON object of variables");
    }
    const std::string text = tmpl->render(messages, options);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
}

}  // namespace kvslim::cli
