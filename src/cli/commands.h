// Each subcommand of `kvslim` registers its options and callback on the root CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kvslim::cli {

void add_info_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_init_model_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_presses_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_train_tokenizer_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_eval_merge_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_train_model_command(CLI::App& app);
void add_init_adapter_command(CLI::App& app);
void add_train_lookahead_command(CLI::App& app);
void add_apply_template_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_claims_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace kvslim::cli
