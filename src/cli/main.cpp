// kvslim: the command line. Every error reaches the user as one line naming what is wrong.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "tensor/isa.h"
#include "util/error.h"

namespace {

// The groups `kvslim --help` lists the subcommands under; a subcommand missing here is listed
// under "Other" (and test_cli checks that none is).
const std::map<std::string, std::string>& command_groups() {
  static const std::map<std::string, std::string> groups = {
      {"generate", "Run"},
      {"chat", "Run"},
      {"serve", "Run"},
      {"bench", "Run"},
      {"presses", "Compress"},
      {"inspect", "Compress"},
      {"eval", "Evaluate"},
      {"eval-merge", "Evaluate"},
      {"plot", "Evaluate"},
      {"demo", "Evaluate"},
      {"claims", "Evaluate"},
      {"perplexity", "Evaluate"},
      {"train-tokenizer", "Train"},
      {"train-model", "Train"},
      {"init-adapter", "Train"},
      {"train-lookahead", "Train"},
      {"info", "Tools"},
      {"tokenize", "Tools"},
      {"init-model", "Tools"},
      {"quantize", "Tools"},
      {"apply-template", "Tools"},
  };
  return groups;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvslim: long-context LLM inference on the CPU with a KV cache that really shrinks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("kvslim {} (git {})", KVSLIM_VERSION, KVSLIM_GIT_REVISION));
  kvslim::cli::add_info_command(app);
  kvslim::cli::add_tokenize_command(app);
  kvslim::cli::add_generate_command(app);
  kvslim::cli::add_init_model_command(app);
  kvslim::cli::add_bench_command(app);
  kvslim::cli::add_presses_command(app);
  kvslim::cli::add_inspect_command(app);
  kvslim::cli::add_train_tokenizer_command(app);
  kvslim::cli::add_eval_command(app);
  kvslim::cli::add_eval_merge_command(app);
  kvslim::cli::add_plot_command(app);
  kvslim::cli::add_demo_command(app);
  kvslim::cli::add_claims_command(app);
  kvslim::cli::add_train_model_command(app);
  kvslim::cli::add_init_adapter_command(app);
  kvslim::cli::add_train_lookahead_command(app);
  kvslim::cli::add_apply_template_command(app);
  kvslim::cli::add_chat_command(app);
  kvslim::cli::add_quantize_command(app);
  kvslim::cli::add_perplexity_command(app);
  kvslim::cli::add_serve_command(app);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const auto group = command_groups().find(sub->get_name());
    sub->group(group == command_groups().end() ? "Other" : group->second);
  }
  try {
    kvslim::active_isa();  // a bad KVSLIM_ISA is one error line before any work
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kvslim::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
