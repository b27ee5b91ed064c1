// kvslim plot DIR: SVG charts of an eval results directory.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "eval/plots.h"
#include "util/error.h"

namespace kvslim::cli {

void add_plot_command(CLI::App& app) {
  struct Options {
    std::string dir;
    std::string out;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("plot", "SVG charts of an eval directory: score vs budget, NIAH heatmaps, memory vs score");
  cmd->add_option("dir", opt->dir, "eval output directory (with samples.jsonl)")->required();
  cmd->add_option("-o,--out", opt->out, "directory for the SVG files (default: DIR/plots)");
  cmd->callback([opt] {
    const std::string samples = (std::filesystem::path(opt->dir) / "samples.jsonl").string();
    if (!std::filesystem::exists(samples)) fail("{} has no samples.jsonl", opt->dir);
    const std::string out = opt->out.empty() ? (std::filesystem::path(opt->dir) / "plots").string() : opt->out;
    for (const std::string& path : eval::write_plots(eval::read_records(samples), out)) fmt::print("{}\n", path);
  });
}

}  // namespace kvslim::cli
