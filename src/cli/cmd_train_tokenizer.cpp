// kvslim train-tokenizer: a small byte-level BPE vocabulary learned from text, written as a
// tokenizer-only `gpt2` GGUF file (for `init-model --vocab-from` and the models kvslim trains).
#include <fmt/format.h>

#include <chrono>

#include "cli/commands.h"
#include "cli/prompt_input.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace kvslim::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void add_train_tokenizer_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> inputs;
    tok::BpeTrainerOptions trainer;
    std::string out;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("train-tokenizer", "learn a byte-level BPE vocabulary and write it as a gpt2 GGUF tokenizer");
  cmd->add_option("-i,--input", opt->inputs, "training text file, repeatable (- reads stdin)")->required();
  cmd->add_option("--vocab", opt->trainer.vocab_size, "tokens in all: 256 bytes, merge results, BOS and EOS")
      ->capture_default_str();
  cmd->add_option("--pre", opt->trainer.pre, "pre-tokenizer written to tokenizer.ggml.pre")->capture_default_str();
  cmd->add_flag("--allow-digit-merges", opt->trainer.allow_digit_merges,
                "let merges form tokens containing digits (by default every digit stays its own token)");
  cmd->add_option("-o,--output", opt->out, "output GGUF path")->required();
  cmd->callback([opt] {
    const auto start = std::chrono::steady_clock::now();
    tok::BpeTrainer trainer(opt->trainer);  // checks the options before any input is read
    std::vector<std::string> texts;
    size_t text_bytes = 0;
    for (const std::string& path : opt->inputs) {
      texts.push_back(read_bytes(path, "training text"));
      text_bytes += texts.back().size();
      trainer.add_text(texts.back());
    }
    const double counting_s = seconds_since(start);
    const auto merging_start = std::chrono::steady_clock::now();
    const tok::TrainedVocab vocab = trainer.train();
    const double merging_s = seconds_since(merging_start);
    tok::write_tokenizer_gguf(vocab, opt->out);

    // Compression as a model will see it: the written file, loaded like any model's tokenizer.
    const auto encoding_start = std::chrono::steady_clock::now();
    const Tokenizer tokenizer = Tokenizer::from_gguf(gguf::File::open(opt->out));
    size_t n_tokens = 0;
    for (const std::string& text : texts) {
      for (const std::string_view chunk : tok::line_chunks(text))
        n_tokens += tokenizer.encode(chunk, false, false).size();
    }
    const double encoding_s = seconds_since(encoding_start);

    fmt::print(
        "vocabulary: {} tokens = 256 bytes + {} merge results + BOS {} + EOS {} ({} merges, pre-tokenizer {}{})\n",
        vocab.tokens.size(), vocab.tokens.size() - tok::BpeTrainer::kMinVocabSize, vocab.bos_id, vocab.eos_id,
        vocab.merges.size(), vocab.pre, opt->trainer.allow_digit_merges ? ", digit merges allowed" : "");
    fmt::print("training text: {} bytes in {} input(s) -> {} tokens, {:.3f} bytes per token\n", text_bytes,
               texts.size(), n_tokens, double(text_bytes) / double(std::max<size_t>(n_tokens, 1)));
    fmt::print("time: {:.2f} s reading and pre-tokenizing, {:.2f} s merging, {:.2f} s encoding to measure\n",
               counting_s, merging_s, encoding_s);
    fmt::print("wrote {}\n", opt->out);
  });
}

}  // namespace kvslim::cli
