// kvslim train-lookahead: trains a LookaheadKV adapter for a model (lookahead/trainer.h) and
// writes it; progress on stderr, held-out KL and recall along the way.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "lookahead/trainer.h"
#include "model/fingerprint.h"
#include "model/model.h"

namespace kvslim::cli {

namespace {

struct Options {
  std::string model, out, init, responses;
  LookaheadTrainOptions train;
  int64_t max_tokens = -1;
  uint64_t init_seed = 1;
  int threads = 0;
};

class ProgressLine {
 public:
  void operator()(const TrainProgress& p) {
    using Phase = TrainProgress::Phase;
    if (p.phase != phase_ || p.done == 1) {
      end_line();
      phase_ = p.phase;
      start_ = std::chrono::steady_clock::now();
    }
    const auto now = std::chrono::steady_clock::now();
    if (p.done != p.total && now - last_print_ < std::chrono::milliseconds(100)) return;  // at most 10 lines/s
    last_print_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = p.done > 0 ? elapsed / p.done * (p.total - p.done) : 0;
    const char* what = p.phase == Phase::Responses ? "responses"
                       : p.phase == Phase::Targets ? "targets  "
                                                   : "training ";
    constexpr int kWidth = 24;
    const int filled = p.total > 0 ? kWidth * p.done / p.total : 0;
    fmt::print(stderr, "\r{} [{}{}] {}/{}", what, std::string(filled, '='), std::string(kWidth - filled, ' '), p.done,
               p.total);
    if (p.phase == Phase::Training)
      fmt::print(stderr, " loss {:.4f} lr {:.2e} |g| {:.3f} {:.1f} steps/s", p.loss, p.lr, p.grad_norm,
                 p.done / std::max(elapsed, 1e-9));
    fmt::print(stderr, " ETA {:.0f}s   ", eta);
    open_ = true;
    if (p.done == p.total) {
      fmt::print(stderr, "\n");
      open_ = false;
    }
  }

  // Ends a half-written progress line before other output.
  void end_line() {
    if (open_) fmt::print(stderr, "\n");
    open_ = false;
  }

 private:
  TrainProgress::Phase phase_ = TrainProgress::Phase::Responses;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_print_;
  bool open_ = false;
};

void run(Options& opt) {
  const auto model = Model::load(opt.model);
  ResponseDataOptions& data = opt.train.data;
  data.seed = opt.train.seed;
  data.cache_path = opt.responses.empty() ? opt.out + ".responses.jsonl" : opt.responses;
  data.max_tokens = opt.max_tokens >= 0
                        ? opt.max_tokens
                        : std::min<int64_t>(2048, int64_t(model->config().context_length) - data.max_response);
  const LookaheadAdapter start = opt.init.empty()
                                     ? LookaheadAdapter::initial(*model, opt.train.shape, opt.init_seed)
                                     : LookaheadAdapter::load(opt.init, model->config(), model_fingerprint(*model));
  ThreadPool pool(opt.threads);
  ProgressLine progress;
  TrainCallbacks callbacks;
  callbacks.progress = std::ref(progress);
  callbacks.heldout = [&](int step, const HeldOutMetrics& m) {
    progress.end_line();
    fmt::print(stderr, "held-out after {} steps: KL {:.4f}, recall@{} {:.3f} (SnapKV {:.3f})\n", step, m.kl,
               opt.train.recall_budget, m.recall, m.snapkv_recall);
  };
  TrainSummary s;
  const LookaheadAdapter adapter = train_lookahead(*model, pool, opt.train, start, callbacks, s);
  adapter.save(opt.out);
  const double steps_per_s = opt.train.steps / std::max(s.train_seconds, 1e-9);
  fmt::print(stderr,
             "wrote {}\n{} training / {} held-out prompts ({} skipped: empty response), {:.1f} MB of targets; data "
             "{:.1f} s, training {:.1f} s ({:.2f} steps/s, {:.1f} ms per prompt forward+backward, {} threads)\n"
             "held-out KL {:.4f} -> {:.4f}, recall@{} {:.3f} -> {:.3f} (SnapKV {:.3f})\n",
             opt.out, s.train_examples, s.heldout_examples, s.skipped, s.target_bytes / 1e6, s.data_seconds,
             s.train_seconds, steps_per_s, 1000.0 / (steps_per_s * opt.train.batch), pool.size(), s.initial.kl,
             s.final.kl, opt.train.recall_budget, s.initial.recall, s.final.recall, s.final.snapkv_recall);
}

}  // namespace

void add_train_lookahead_command(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  LookaheadTrainOptions& t = opt->train;
  CLI::App* cmd =
      app.add_subcommand("train-lookahead", "train a LookaheadKV adapter (lookahead rows + LoRA) for a model");
  cmd->add_option("-m,--model", opt->model, "base GGUF model (frozen)")->required();
  cmd->add_option("-o,--output", opt->out, "adapter GGUF to write")->required();
  cmd->add_option("--init", opt->init, "start from this adapter (its shape overrides --lookahead/--rank/--alpha)");
  cmd->add_option("--lookahead", t.shape.n_lookahead, "lookahead rows m")->capture_default_str();
  cmd->add_option("--rank", t.shape.rank, "LoRA rank")->capture_default_str();
  cmd->add_option("--alpha", t.shape.alpha, "LoRA alpha (scale alpha/rank)")->capture_default_str();
  cmd->add_option("--steps", t.steps, "optimiser steps")->capture_default_str();
  cmd->add_option("--batch", t.batch, "prompts per step")->capture_default_str();
  cmd->add_option("--lr", t.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--warmup", t.warmup, "warmup steps (default: 5% of the steps)");
  cmd->add_option("--clip", t.clip, "global gradient-norm limit (0: off)")->capture_default_str();
  cmd->add_option("--samples", t.data.train_samples, "training prompts")->capture_default_str();
  cmd->add_option("--heldout", t.data.heldout_samples, "held-out prompts")->capture_default_str();
  cmd->add_option("--min-tokens", t.data.min_tokens, "shortest prompt")->capture_default_str();
  cmd->add_option("--max-tokens", opt->max_tokens, "longest prompt (default: min(2048, context - response))");
  cmd->add_option("--response-tokens", t.data.max_response, "longest greedy response")->capture_default_str();
  cmd->add_option("--responses", opt->responses, "response cache (default: OUTPUT.responses.jsonl)");
  cmd->add_option("--eval-every", t.eval_every, "steps between held-out evaluations (0: start and end)")
      ->capture_default_str();
  cmd->add_option("--recall-budget", t.recall_budget, "B of the held-out recall@B")->capture_default_str();
  cmd->add_option("--seed", t.seed, "data and order seed")->capture_default_str();
  cmd->add_option("--init-seed", opt->init_seed, "seed of a fresh adapter's initialisation")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->callback([opt] { run(*opt); });
}

}  // namespace kvslim::cli
