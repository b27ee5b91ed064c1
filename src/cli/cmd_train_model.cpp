// kvslim train-model: trains a llama model from scratch on the evaluation generators' samples
// (src/train/trainer.h), with a progress line (tokens/s, loss, ETA) on stderr, optional JSONL
// log of every step and evaluation, checkpoints, and Ctrl-C stopping after a checkpoint.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "train/trainer.h"
#include "util/error.h"

namespace kvslim::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void request_stop(int) { g_stop = true; }

std::string duration(double seconds) {
  const int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// The progress line, and the optional JSONL log.
class Reporter {
 public:
  Reporter(const std::string& log_path, int64_t batch_tokens, int log_every)
      : batch_tokens_(batch_tokens), log_every_(std::max(1, log_every)), tty_(isatty(fileno(stderr))) {
    if (!log_path.empty()) {
      log_.open(log_path, std::ios::app);
      if (!log_) fail("{}: cannot open the training log for writing", log_path);
    }
  }

  void step(const train::StepReport& r) {
    elapsed_ += r.seconds;
    const double rate = double(r.stats.tokens) / std::max(r.seconds, 1e-9);
    rate_ = rate_ == 0 ? rate : 0.9 * rate_ + 0.1 * rate;  // smoothed, for the ETA
    loss_sum_ += r.stats.loss;
    answer_sum_ += r.stats.answer_loss;
    ++loss_count_;
    const double eta = double(r.total_steps - r.step) * double(batch_tokens_) / std::max(rate_, 1e-9);
    const std::string line = fmt::format(
        "step {}/{} {:5.1f}% | len {} | loss {:.4f} | answer {:.4f} | lr {:.2e} | |g| {:.2f} | {:.0f} tok/s | "
        "ETA {}",
        r.step, r.total_steps, 100.0 * double(r.step) / double(r.total_steps), r.length, r.stats.loss,
        r.stats.answer_loss, r.stats.lr, r.stats.grad_norm, rate_, duration(eta));
    if (r.step % log_every_ == 0 || r.step == r.total_steps) {
      // A lasting line with the mean loss since the last one: the loss curve.
      clear();
      fmt::print(stderr, "{} | mean loss {:.4f} answer {:.4f} | elapsed {}\n", line, loss_sum_ / loss_count_,
                 answer_sum_ / loss_count_, duration(elapsed_));
      loss_sum_ = 0;
      answer_sum_ = 0;
      loss_count_ = 0;
    } else if (tty_) {
      fmt::print(stderr, "\r{}\x1b[K", line);
      dirty_ = true;
    }
    if (log_.is_open()) {
      log_ << nlohmann::json{{"step", r.step},           {"length", r.length},
                             {"sequences", r.sequences}, {"tokens", r.stats.tokens},
                             {"loss", r.stats.loss},     {"answer_loss", r.stats.answer_loss},
                             {"lr", r.stats.lr},         {"grad_norm", r.stats.grad_norm},
                             {"seconds", r.seconds},     {"elapsed", elapsed_}}
                  .dump()
           << '\n';
      log_.flush();
    }
  }

  void eval(int64_t step, const std::vector<train::EvalScore>& scores) {
    clear();
    nlohmann::json entries = nlohmann::json::array();
    std::string text;
    for (const auto& s : scores) {
      text += fmt::format(" {}@{} {:.2f}", s.task, s.length, s.score);
      entries.push_back({{"task", s.task}, {"length", s.length}, {"score", s.score}, {"samples", s.samples}});
    }
    fmt::print(stderr, "eval step {} (held-out seeds):{}\n", step, text);
    if (log_.is_open()) {
      log_ << nlohmann::json{{"step", step}, {"eval", entries}}.dump() << '\n';
      log_.flush();
    }
  }

  void note(const std::string& text) {
    clear();
    fmt::print(stderr, "{}\n", text);
  }

 private:
  void clear() {
    if (dirty_) fmt::print(stderr, "\r\x1b[K");
    dirty_ = false;
  }

  int64_t batch_tokens_;
  int log_every_;
  bool tty_;
  bool dirty_ = false;
  double rate_ = 0, elapsed_ = 0, loss_sum_ = 0, answer_sum_ = 0;
  int loss_count_ = 0;
  std::ofstream log_;
};

template <class T>
std::vector<T> split_list(const std::string& text, const char* what) {
  std::vector<T> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    if (item.empty()) fail("{} '{}' has an empty item", what, text);
    if constexpr (std::is_same_v<T, std::string>) {
      out.push_back(item);
    } else {
      size_t used = 0;
      int64_t value = 0;
      try {
        value = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || value < 1) fail("{} '{}': '{}' is not a positive integer", what, text, item);
      out.push_back(value);
    }
    begin = comma + 1;
  }
  return out;
}

// The text of the first n samples of the training stream (induction samples have none), one
// blank line between samples.
void print_samples(const train::TrainerOptions& t, int64_t n) {
  const Tokenizer tokenizer = train::load_tokenizer(t.vocab_path);
  const train::DataStream stream(tokenizer, train::parse_task_mix(t.tasks), t.prompt_weight, t.seed, INT64_MAX);
  const int64_t length = train::Curriculum::parse(t.curriculum).max_length();
  for (int64_t i = 0; i < n; ++i) {
    const std::string text = stream.sample_text(uint64_t(i), length);
    if (!text.empty()) fmt::print("{}\n\n", text);
  }
}

}  // namespace

void add_train_model_command(CLI::App& app) {
  struct Options {
    train::TrainerOptions trainer;
    std::string type = "f16";
    std::string eval_tasks = "niah_single_1,niah_single_2,passkey";
    std::string eval_lengths = "1024,2048";
    std::string log;
    int log_every = 50;
    int threads = 0;
    bool untied = false;
    int64_t print_samples = 0;
  };
  auto opt = std::make_shared<Options>();
  train::TrainerOptions& t = opt->trainer;
  ModelConfig& c = t.model;
  // Defaults: the recipe of the trials in the README (a 0.9M-parameter model that learns the
  // retrieval tasks within about an hour on 2 cores).
  c.n_layers = 4;
  c.dim = 128;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 384;
  c.context_length = 2304;
  t.step.schedule = train::LrSchedule{3e-3f, 20, 4000, 0.1f};

  CLI::App* cmd =
      app.add_subcommand("train-model", "train a llama model from scratch on the synthetic long-context tasks");
  cmd->add_option("--layers", c.n_layers, "transformer blocks")->capture_default_str();
  cmd->add_option("--dim", c.dim, "embedding size")->capture_default_str();
  cmd->add_option("--heads", c.n_heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", c.n_kv_heads, "key/value heads (GQA)")->capture_default_str();
  cmd->add_option("--ffn", c.ffn_dim, "feed-forward size")->capture_default_str();
  cmd->add_option("--ctx", c.context_length, "context length (RoPE table; longest training sequence)")
      ->capture_default_str();
  cmd->add_option("--rope-base", c.rope_base, "RoPE frequency base")->capture_default_str();
  cmd->add_flag("--untied", opt->untied, "a separate output matrix (default: tied to the token embedding)");
  cmd->add_option("--vocab-from", t.vocab_path, "tokenizer GGUF (e.g. from train-tokenizer; default: byte vocabulary)");
  cmd->add_option("--init-from", t.init_from,
                  "start from this trained model's weights and tokenizer (its shape; --ctx may grow) instead of a "
                  "random initialisation");
  cmd->add_option("--grow-layers", t.grow_layers,
                  "with --init-from: add this many blocks, spread between the model's, each starting as the identity "
                  "(the grown model computes what the file's does until trained)")
      ->capture_default_str();
  cmd->add_option("--steps", t.step.schedule.total_steps, "optimizer steps")->capture_default_str();
  cmd->add_option("--lr", t.step.schedule.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--warmup", t.step.schedule.warmup, "linear warmup steps")->capture_default_str();
  cmd->add_option("--min-lr-ratio", t.step.schedule.min_ratio, "final learning rate / peak (cosine decay)")
      ->capture_default_str();
  cmd->add_option("--weight-decay", t.adam.weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->capture_default_str();
  cmd->add_option("--beta1", t.adam.beta1, "AdamW beta1")->capture_default_str();
  cmd->add_option("--beta2", t.adam.beta2, "AdamW beta2")->capture_default_str();
  cmd->add_option("--clip", t.step.clip, "global gradient-norm limit (0: off)")->capture_default_str();
  cmd->add_option("--batch-tokens", t.batch_tokens, "tokens per step (whole samples, at least this many)")
      ->capture_default_str();
  cmd->add_option("--micro-tokens", t.step.micro_tokens, "tokens per forward/backward (bounds activation memory)")
      ->capture_default_str();
  cmd->add_option("--curriculum", t.curriculum,
                  "prompt lengths: LEN:STEPS,...,LEN (last stage to the end); (LEN:STEPS,...)xN repeats a group")
      ->capture_default_str();
  cmd->add_option("--tasks", t.tasks,
                  "training task mix: TASK[:WEIGHT],... (eval tasks, 'induction', the dense 'recall', "
                  "'recall_uuids' and 'chains')")
      ->capture_default_str();
  cmd->add_option("--prompt-weight", t.prompt_weight, "loss weight of prompt tokens (answer and EOS: 1)")
      ->capture_default_str();
  cmd->add_option("--seed", t.seed, "initialisation and data-order seed")->capture_default_str();
  cmd->add_option("--checkpoint", t.checkpoint_path, "checkpoint file (parameters, Adam state, data position)");
  cmd->add_option("--checkpoint-every", t.checkpoint_every, "steps between checkpoints (0: at the end only)")
      ->capture_default_str();
  cmd->add_flag("--resume", t.resume, "continue from --checkpoint when it exists (its settings win)");
  cmd->add_option("--eval-every", t.eval_every, "steps between held-out evaluations (0: none)")->capture_default_str();
  cmd->add_option("--eval-tasks", opt->eval_tasks, "held-out tasks")->capture_default_str();
  cmd->add_option("--eval-lengths", opt->eval_lengths, "held-out prompt lengths")->capture_default_str();
  cmd->add_option("--eval-samples", t.eval.samples, "held-out samples per task and length")->capture_default_str();
  cmd->add_option("-o,--output", t.out_path, "output model GGUF (required unless --print-samples)");
  cmd->add_option("--print-samples", opt->print_samples,
                  "print the text of this many training samples (at the curriculum's longest length) to stdout and "
                  "exit: text to train a tokenizer on");
  cmd->add_option("--type", opt->type, "output matrix type: f16 or f32")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "threads (0: all cores)")->capture_default_str();
  cmd->add_option("--log", opt->log, "append every step and evaluation as JSON lines to this file");
  cmd->add_option("--log-every", opt->log_every, "steps between lasting progress lines")->capture_default_str();
  cmd->callback([opt] {
    train::TrainerOptions& t = opt->trainer;
    if (opt->print_samples > 0) {
      print_samples(t, opt->print_samples);
      return;
    }
    t.tied_output = !opt->untied;
    t.out_type = dtype_from_name(opt->type.c_str());
    t.eval.tasks = split_list<std::string>(opt->eval_tasks, "--eval-tasks");
    t.eval.lengths = split_list<int64_t>(opt->eval_lengths, "--eval-lengths");
    ThreadPool pool(opt->threads);
    train::Trainer trainer(t, pool);
    const train::TrainerOptions& run = trainer.options();
    const ModelConfig& m = run.model;
    fmt::print(stderr,
               "model: llama, {} layers, dim {}, {} heads / {} KV heads, ffn {}, vocab {}, ctx {}, {} output, {:.2f}M "
               "parameters\n",
               m.n_layers, m.dim, m.n_heads, m.n_kv_heads, m.ffn_dim, m.n_vocab, m.context_length,
               run.tied_output ? "tied" : "untied", double(trainer.model().layout().size()) / 1e6);
    fmt::print(stderr, "training: {} steps of >= {} tokens, lr {} (warmup {}), curriculum {}, {} threads\n",
               run.step.schedule.total_steps, run.batch_tokens, run.step.schedule.lr, run.step.schedule.warmup,
               run.curriculum, pool.size());
    Reporter reporter(opt->log, run.batch_tokens, opt->log_every);
    train::TrainerEvents events;
    events.on_step = [&](const train::StepReport& r) { reporter.step(r); };
    events.on_eval = [&](int64_t step, const std::vector<train::EvalScore>& s) { reporter.eval(step, s); };
    events.on_note = [&](const std::string& text) { reporter.note(text); };
    g_stop = false;
    auto previous = std::signal(SIGINT, request_stop);
    trainer.run(events, [] { return g_stop.load(); });
    std::signal(SIGINT, previous);
    if (g_stop) reporter.note(fmt::format("stopped at step {}; --resume continues", trainer.step()));
  });
}

}  // namespace kvslim::cli
