// kvslim eval-merge OUT DIR...: the shards of a sweep (or any results directories) as one.
#include <fmt/format.h>

#include "cli/commands.h"
#include "eval/sweep.h"

namespace kvslim::cli {

void add_eval_merge_command(CLI::App& app) {
  struct Options {
    std::string out;
    std::vector<std::string> inputs;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("eval-merge", "merge eval result directories (shards), dropping duplicate runs");
  cmd->add_option("out", opt->out, "output directory (its own samples.jsonl, if any, is kept)")->required();
  cmd->add_option("inputs", opt->inputs, "result directories to merge")->required();
  cmd->callback([opt] {
    const eval::Summary summary = eval::merge_directories(opt->out, opt->inputs);
    fmt::print("{}", eval::summary_markdown(summary));
    fmt::print(stderr, "eval-merge: {} summary rows in {}/summary.csv and summary.md\n", summary.rows.size(), opt->out);
  });
}

}  // namespace kvslim::cli
