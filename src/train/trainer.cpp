#include "train/trainer.h"

#include <chrono>
#include <filesystem>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tasks/task.h"
#include "train/checkpoint.h"
#include "train/export.h"
#include "train/init_from.h"
#include "util/error.h"

namespace kvslim::train {

namespace {

const gguf::Value& run_key(const Checkpoint& ck, const std::string& key) {
  for (const gguf::MetadataEntry& e : ck.run_keys)
    if (e.key == key) return e.value;
  fail("checkpoint has no '{}' key (not written by train-model?)", key);
}

}  // namespace

void TrainerOptions::validate() const {
  step.schedule.validate();
  if (batch_tokens < 1) fail("--batch-tokens must be >= 1, got {}", batch_tokens);
  if (step.micro_tokens < 1) fail("--micro-tokens must be >= 1, got {}", step.micro_tokens);
  if (checkpoint_every < 0 || eval_every < 0) fail("--checkpoint-every and --eval-every must be >= 0");
  if (resume && checkpoint_path.empty()) fail("--resume needs --checkpoint FILE");
  if (checkpoint_every > 0 && checkpoint_path.empty()) fail("--checkpoint-every needs --checkpoint FILE");
  if (!init_from.empty() && !vocab_path.empty())
    fail("--init-from takes the tokenizer from its model; drop --vocab-from");
  if (grow_layers < 0) fail("--grow-layers must be >= 0, got {}", grow_layers);
  if (grow_layers > 0 && init_from.empty()) fail("--grow-layers adds blocks to an --init-from model; give one");
  if (out_path.empty()) fail("an output model path (-o) is required");
  if (eval_every > 0 && (eval.tasks.empty() || eval.lengths.empty()))
    fail("held-out evaluation needs at least one task and one length");
  if (!(prompt_weight >= 0 && prompt_weight <= 1)) fail("--prompt-weight must be in [0, 1], got {}", prompt_weight);
  if (eval_every > 0)
    for (const std::string& task : eval.tasks)
      for (const int64_t length : eval.lengths)
        if (tasks::find_task(task).min_tokens > length)
          fail("held-out task {} needs prompts of at least {} tokens, not {}", task, tasks::find_task(task).min_tokens,
               length);
}

Trainer::Trainer(const TrainerOptions& options, ThreadPool& pool) : options_(options), pool_(pool) {
  options_.validate();
  std::unique_ptr<Checkpoint> ck;
  if (options_.resume && std::filesystem::exists(options_.checkpoint_path))
    ck = std::make_unique<Checkpoint>(load_checkpoint(options_.checkpoint_path));
  if (ck) {
    resumed_ = true;
    options_.model = ck->config;
    options_.tied_output = ck->tied_output;
    options_.adam = ck->adam;
    options_.step = ck->step_options;
    options_.seed = ck->seed;
    options_.tasks = run_key(*ck, "train.run.tasks").s;
    options_.curriculum = run_key(*ck, "train.run.curriculum").s;
    options_.prompt_weight = float(run_key(*ck, "train.run.prompt_weight").f);
    options_.batch_tokens = int64_t(run_key(*ck, "train.run.batch_tokens").u);
    vocab_source_ = options_.checkpoint_path;  // the checkpoint carries the tokenizer keys
  } else if (!options_.init_from.empty()) {
    const int64_t context = options_.model.context_length;
    options_.model = read_model_shape(options_.init_from, options_.tied_output);
    init_from_layers_ = options_.model.n_layers;
    options_.model.n_layers += options_.grow_layers;
    if (context < options_.model.context_length)
      fail("--ctx {} is shorter than {}'s context {}", context, options_.init_from, options_.model.context_length);
    options_.model.context_length = int(context);
    vocab_source_ = options_.init_from;  // the model carries its tokenizer keys
  } else {
    vocab_source_ = options_.vocab_path;
  }
  curriculum_ = Curriculum::parse(options_.curriculum);
  tokenizer_ = std::make_unique<Tokenizer>(load_tokenizer(vocab_source_));
  if (!ck) options_.model.n_vocab = tokenizer_->n_vocab();
  options_.model.arch = Arch::Llama;
  if (curriculum_.max_length() > options_.model.context_length)
    fail("the curriculum reaches prompts of {} tokens but the context is {} (--ctx)", curriculum_.max_length(),
         options_.model.context_length);

  model_ = std::make_unique<TrainModel<float>>(options_.model, options_.tied_output);
  optimizer_ = std::make_unique<AdamW>(model_->layout(), options_.adam);
  data_ = std::make_unique<DataStream>(*tokenizer_, parse_task_mix(options_.tasks), options_.prompt_weight,
                                       options_.seed, options_.model.context_length);
  if (ck) {
    model_->params() = std::move(ck->params);
    optimizer_->restore(std::move(ck->adam_m), std::move(ck->adam_v), ck->step);
    data_->set_position(ck->data_position);
  } else if (!options_.init_from.empty()) {
    model_->init_params(options_.seed);  // what grown blocks start from
    load_model_params(options_.init_from, *model_, init_from_layers_);
  } else {
    model_->init_params(options_.seed);
  }
}

Trainer::~Trainer() = default;

void Trainer::run(const TrainerEvents& events, const std::function<bool()>& should_stop) {
  if (resumed_ && events.on_note)
    events.on_note(fmt::format("resumed from {} at step {}", options_.checkpoint_path, step()));
  const int64_t total = options_.step.schedule.total_steps;
  while (step() < total) {
    const auto start = std::chrono::steady_clock::now();
    StepReport report;
    report.length = curriculum_.length_at(step());
    const std::vector<TrainSequence> batch = data_->next_batch(report.length, options_.batch_tokens);
    report.sequences = int(batch.size());
    report.stats = train_step(*model_, *optimizer_, batch, options_.step, pool_);
    report.step = step();
    report.total_steps = total;
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (events.on_step) events.on_step(report);

    const bool last = step() == total;
    const bool stop = !last && should_stop && should_stop();
    const bool checkpoint =
        !options_.checkpoint_path.empty() &&
        (last || stop || (options_.checkpoint_every > 0 && step() % options_.checkpoint_every == 0));
    const bool evaluate = options_.eval_every > 0 && (last || step() % options_.eval_every == 0);
    if (checkpoint) save_checkpoint_now(events);
    if (checkpoint || evaluate || last) export_now(events);
    if (evaluate) evaluate_now(events);
    if (stop) return;
  }
}

void Trainer::save_checkpoint_now(const TrainerEvents& events) {
  using gguf::Value;
  const std::vector<gguf::MetadataEntry> run = {
      {"train.run.tasks", Value::of_string(options_.tasks)},
      {"train.run.curriculum", Value::of_string(curriculum_.to_string())},
      {"train.run.prompt_weight", Value::of_f32(options_.prompt_weight)},
      {"train.run.batch_tokens", Value::of_u64(uint64_t(options_.batch_tokens))},
  };
  save_checkpoint(options_.checkpoint_path, *model_, *optimizer_, options_.step, options_.seed, data_->position(),
                  vocab_source_, run);
  if (events.on_note) events.on_note(fmt::format("step {}: wrote checkpoint {}", step(), options_.checkpoint_path));
}

void Trainer::export_now(const TrainerEvents& events) {
  export_model(*model_, options_.out_type, vocab_source_, options_.out_path);
  if (events.on_note) events.on_note(fmt::format("step {}: wrote {}", step(), options_.out_path));
}

void Trainer::evaluate_now(const TrainerEvents& events) {
  const auto model = Model::load(options_.out_path);
  const std::vector<EvalScore> scores = evaluate_heldout(*model, options_.eval, pool_);
  if (events.on_eval) events.on_eval(step(), scores);
}

}  // namespace kvslim::train
