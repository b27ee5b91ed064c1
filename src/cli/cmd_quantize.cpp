// kvslim quantize: rewrite an F32/F16/BF16 GGUF model with quantized matrices, following
// llama-quantize's presets (table in src/model/quantize_preset.h and docs/quantization-tools.md).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "model/quantize_file.h"

namespace kvslim::cli {

namespace {

std::string shape(const std::vector<uint64_t>& dims) {
  std::string s;
  for (uint64_t d : dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

double mib(uint64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

}  // namespace

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out;
    QuantizeOptions quantize;
    int threads = 0;
  };
  auto opt = std::make_shared<Options>();
  std::string types;
  for (const QuantPresetInfo& p : quant_presets()) types += (types.empty() ? "" : ", ") + std::string(p.name);
  CLI::App* cmd = app.add_subcommand("quantize", "quantize an F32/F16/BF16 GGUF model to a llama.cpp preset");
  cmd->add_option("input", opt->in, "input GGUF model")->required();
  cmd->add_option("output", opt->out, "output GGUF path (written atomically)")->required();
  cmd->add_option("--type", opt->quantize.preset, "preset: " + types)->required();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->add_flag("--allow-requantize", opt->quantize.allow_requantize,
                "accept an already-quantized input (dequantized, then quantized again)");
  cmd->callback([opt] {
    ThreadPool pool(opt->threads);
    const QuantizeSummary s = quantize_file(opt->in, opt->out, opt->quantize, pool, [](const QuantizedTensor& t) {
      std::string what;
      if (!t.quantized) {
        what = fmt::format("{:>6} kept", t.from_type);
      } else {
        what = fmt::format("{:>6} -> {:<6} rmse {:.3e}", t.from_type, dtype_name(t.type), t.rmse);
        if (t.fallback) {
          what += fmt::format("  (fallback: rows of {} are not whole {} blocks)", t.dims[0], dtype_name(t.wanted));
        }
      }
      fmt::print(stderr, "[{:>4}/{}] {:<34} [{:>13}] {}  {:.2f} -> {:.2f} MiB\n", t.index, t.count, t.name,
                 shape(t.dims), what, mib(t.bytes_in), mib(t.bytes_out));
    });
    fmt::print(stderr,
               "quantized {} of {} tensors ({} fallbacks) in {:.1f} s: {:.2f} MiB -> {:.2f} MiB of tensor data\n"
               "wrote {}\n",
               s.quantized, s.tensors, s.fallbacks, s.seconds, mib(s.bytes_in), mib(s.bytes_out), opt->out);
  });
}

}  // namespace kvslim::cli
