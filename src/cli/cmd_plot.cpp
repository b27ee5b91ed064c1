// kvslim plot DIR: SVG charts of an eval results directory.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

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
  CLI::App* cmd = app.add_subcommand("plot", "SVG charts of an eval directory: score vs budget, NIAH heatmaps, memory vs score");
  cmd->add_option("dir", opt->dir, "eval output directory (with samples.jsonl)")->required();
  cmd->add_option("-o,--out", opt->out, "directory for the SVG files (default: DIR/plots)");
  cmd->callback([opt] {
    const std::string samples = (std::filesystem::path(opt->dir) / "samples.jsonl").string();
    if (!std::filesystem::exists(samples)) fail("{} has no samples.jsonl", opt->dir);
    const std::vector<eval::PlotFile> files = eval::make_plots(eval::read_records(samples));
    const std::filesystem::path out = opt->out.empty() ? std::filesystem::path(opt->dir) / "plots" : std::filesystem::path(opt->out);
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) fail("cannot create the output directory {}: {}", out.string(), ec.message());
    for (const eval::PlotFile& f : files) {
      const std::filesystem::path path = out / f.name;
      std::ofstream file(path, std::ios::binary);
      file << f.svg;
      file.close();
      if (!file) fail("cannot write {}", path.string());
      fmt::print("{}\n", path.string());
    }
  });
}

}  // namespace kvslim::cli
