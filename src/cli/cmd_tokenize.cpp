// kvslim tokenize: token ids of a text, from any GGUF with a tokenizer (vocab-only files too).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/prompt_input.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvslim::cli {

void add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string model;
    PromptInput prompt;
    bool bos = false;
    bool special = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text, separated by spaces");
  cmd->add_option("-m,--model", opt->model, "GGUF file with a tokenizer")->required();
  opt->prompt.add_options(*cmd);
  cmd->add_flag("--bos", opt->bos, "prepend the BOS token");
  cmd->add_flag("--special", opt->special, "parse special tokens written in the text");
  cmd->callback([opt] {
    const gguf::File file = gguf::File::open(opt->model);
    const Tokenizer tokenizer = Tokenizer::from_gguf(file);
    const auto ids = tokenizer.encode(opt->prompt.read(), opt->bos, opt->special);
    fmt::print("{}\n", fmt::join(ids, " "));
  });
}

}  // namespace kvslim::cli
