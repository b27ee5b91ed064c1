// The training run around the model: curriculum and task-mix parsing, the data stream (what a
// sample is, its seeds, its loss weights, batching), and the Trainer's resume equal to an
// uninterrupted run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tasks/task.h"
#include "test_models.h"
#include "tokenizer/bpe_trainer.h"
#include "train/curriculum.h"
#include "train/data_stream.h"
#include "train/init_from.h"
#include "train/trainer.h"
#include "util/error.h"

namespace kvslim::train {
namespace {

const Tokenizer& byte_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_gguf(gguf::File::open(kvslim::testing::tiny_vocab()));
  return tokenizer;
}

TEST(TrainCurriculum, ParsesStagesAndMapsSteps) {
  const Curriculum c = Curriculum::parse("256:2,512:3,1024");
  EXPECT_EQ(c.length_at(0), 256);
  EXPECT_EQ(c.length_at(1), 256);
  EXPECT_EQ(c.length_at(2), 512);
  EXPECT_EQ(c.length_at(4), 512);
  EXPECT_EQ(c.length_at(5), 1024);
  EXPECT_EQ(c.length_at(1000), 1024);
  EXPECT_EQ(c.max_length(), 1024);
  EXPECT_EQ(c.to_string(), "256:2,512:3,1024");
  // Every stage counted: after the last one training stays at its length.
  EXPECT_EQ(Curriculum::parse("512:1,256:1").length_at(7), 256);
  EXPECT_EQ(Curriculum::parse("512:1,256:1").max_length(), 512);
}

TEST(TrainCurriculum, RepeatedGroupsAreWrittenOut) {
  const Curriculum c = Curriculum::parse("128:1,(256:2,512:1)x3,1024");
  EXPECT_EQ(c.to_string(), "128:1,256:2,512:1,256:2,512:1,256:2,512:1,1024");
  const std::vector<int64_t> expected = {128, 256, 256, 512, 256, 256, 512, 256, 256, 512, 1024, 1024};
  for (size_t step = 0; step < expected.size(); ++step) EXPECT_EQ(c.length_at(int64_t(step)), expected[step]) << step;
  EXPECT_EQ(Curriculum::parse("(64:5)x1").to_string(), "64:5");
}

TEST(TrainCurriculum, RejectsBadStages) {
  for (const char* bad : {"", "256:", "256:0", "abc", "256:2,,512", "256,512", "-5", "256:2x", "(256:2)", "(256:2)x0",
                          "(256:2)y2", "(256:2)x2junk", "(256:2x2", "256:2)x2", "((256:2)x2)x2", "()x2", "(256,512)x2"})
    EXPECT_THROW(Curriculum::parse(bad), Error) << bad;
}

TEST(TrainData, TaskMixParsing) {
  const auto mix = parse_task_mix("passkey:2.5,vt");
  ASSERT_EQ(mix.size(), 2u);
  EXPECT_EQ(mix[0].task, "passkey");
  EXPECT_DOUBLE_EQ(mix[0].weight, 2.5);
  EXPECT_DOUBLE_EQ(mix[1].weight, 1.0);
  EXPECT_EQ(parse_task_mix(task_mix_to_string(mix))[0].weight, 2.5);
  for (const char* bad : {"nosuchtask", "passkey:0", "passkey:-1", "passkey:x", "passkey,"})
    EXPECT_THROW(parse_task_mix(bad), Error) << bad;
}

TEST(TrainData, TrainingSequenceIsPromptAnswerEos) {
  const Tokenizer& tok = byte_tokenizer();
  const tasks::TaskSample sample = tasks::make_sample("niah_multivalue", 768, 5, tok);
  const TrainSequence seq = training_sequence(sample, tok, 0.25f);
  const std::vector<int32_t> prompt = tok.encode(sample.prompt(), tok.add_bos_by_default(), false);
  ASSERT_GT(seq.tokens.size(), prompt.size() + 1);
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), seq.tokens.begin()));
  EXPECT_EQ(seq.tokens.back(), tok.eos_id());
  const std::vector<int32_t> answer(seq.tokens.begin() + int64_t(prompt.size()), seq.tokens.end() - 1);
  std::string want = " " + sample.answers[0];
  for (size_t i = 1; i < sample.answers.size(); ++i) want += ", " + sample.answers[i];
  EXPECT_EQ(tok.decode(answer), want);
  EXPECT_EQ(tasks::score_output(sample, tok.decode(answer)), 1.0);
  // Weights: 0 for the first token, prompt_weight over the prompt, 1 on the answer and EOS.
  ASSERT_EQ(seq.weights.size(), seq.tokens.size());
  EXPECT_EQ(seq.weights[0], 0.0f);
  for (size_t t = 1; t < prompt.size(); ++t) ASSERT_EQ(seq.weights[t], 0.25f) << t;
  for (size_t t = prompt.size(); t < seq.tokens.size(); ++t) ASSERT_EQ(seq.weights[t], 1.0f) << t;
}

// A byte-level BPE vocabulary learned from generator text plus " A", " B", ... " Z" many times:
// it merges a space with the capital letter after it, so a prompt ending in a space ("... they
// are: ") cannot be tokenized jointly with vt's capitalised answer without changing the
// prompt's last token.
const Tokenizer& bpe_tokenizer() {
  static const Tokenizer tokenizer = [] {
    tok::BpeTrainer trainer(tok::BpeTrainerOptions{400, "qwen2", false});
    for (uint64_t seed = 0; seed < 10; ++seed)
      trainer.add_text(tasks::make_sample("vt", 512, seed, byte_tokenizer()).prompt());
    std::string spaced_capitals;
    for (int i = 0; i < 50; ++i)
      for (char c = 'A'; c <= 'Z'; ++c) spaced_capitals += std::string(" ") + c;
    trainer.add_text(spaced_capitals);
    const std::string path = kvslim::testing::temp_path("bpe-400.gguf");
    tok::write_tokenizer_gguf(trainer.train(), path);
    return Tokenizer::from_gguf(gguf::File::open(path));
  }();
  return tokenizer;
}

TEST(TrainData, TrainingSequenceKeepsThePromptTokensWithBpe) {
  const Tokenizer& tok = bpe_tokenizer();
  const tasks::TaskSample sample = tasks::make_sample("vt", 512, 11, tok);
  ASSERT_EQ(sample.prompt().back(), ' ');
  const TrainSequence seq = training_sequence(sample, tok, 0.0f);
  const std::vector<int32_t> prompt = tok.encode(sample.prompt(), tok.add_bos_by_default(), false);
  const std::vector<int32_t> joint = tok.encode(sample.prompt() + sample.answers[0], tok.add_bos_by_default(), false);
  ASSERT_FALSE(std::equal(prompt.begin(), prompt.end(), joint.begin())) << "the case under test: a merge across";
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), seq.tokens.begin()));
  EXPECT_EQ(seq.tokens.back(), tok.eos_id());
  const std::vector<int32_t> answer(seq.tokens.begin() + int64_t(prompt.size()), seq.tokens.end() - 1);
  EXPECT_EQ(tasks::score_output(sample, tok.decode(answer)), 1.0);
  EXPECT_EQ(tok.decode(answer).substr(0, sample.answers[0].size()), sample.answers[0]);
}

TEST(TrainData, InductionSequencesRepeatAPatternWithLossOnTheRepeats) {
  const Tokenizer& tok = byte_tokenizer();
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const int64_t length = 32 + int64_t(seed) * 7;
    const TrainSequence s = induction_sequence(seed, length, tok);
    ASSERT_EQ(int64_t(s.tokens.size()), length);
    ASSERT_EQ(s.weights.size(), s.tokens.size());
    EXPECT_EQ(s.tokens[0], tok.bos_id());  // the byte vocabulary adds BOS
    const int64_t first_weighted = std::find(s.weights.begin(), s.weights.end(), 1.0f) - s.weights.begin();
    const int64_t period = first_weighted - 1;
    EXPECT_GE(period, 8);
    EXPECT_LE(period, length / 2);
    for (int64_t t = 1; t < length; ++t) {
      EXPECT_NE(s.tokens[t], tok.bos_id());
      EXPECT_NE(s.tokens[t], tok.eos_id());
      if (t >= first_weighted) {
        ASSERT_EQ(s.weights[t], 1.0f);
        ASSERT_EQ(s.tokens[t], s.tokens[t - period]) << "seed " << seed << " t " << t;
      } else {
        ASSERT_EQ(s.weights[t], 0.0f);
      }
    }
  }
  EXPECT_THROW(induction_sequence(1, 31, tok), Error);
  // It mixes with the evaluation tasks and is the only one that fits short stages.
  const DataStream stream(tok, parse_task_mix("induction,passkey"), 0.1f, 2, 4096);
  EXPECT_EQ(stream.spec(0, 100).task, "induction");
  EXPECT_EQ(int64_t(stream.sample(0, 100).tokens.size()), stream.spec(0, 100).target_tokens);
}

TEST(TrainData, StreamSamplesFitTheStageAndUseTrainingSeeds) {
  const std::vector<TaskWeight> mix = parse_task_mix("passkey:3,niah_single_1:1,cwe:1");
  const DataStream stream(byte_tokenizer(), mix, 0.1f, 7, 4096);
  std::map<std::string, int> counts;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const DataStream::SampleSpec s = stream.spec(uint64_t(i), 512);
    ++counts[s.task];
    EXPECT_GE(s.seed, kFirstTrainingSeed);
    EXPECT_GE(s.target_tokens, std::max<int64_t>(256, tasks::find_task(s.task).min_tokens));
    EXPECT_LE(s.target_tokens, 512);
  }
  // cwe needs 1280 tokens: never drawn at 512; the others in proportion 3 : 1.
  EXPECT_EQ(counts.count("cwe"), 0u);
  EXPECT_NEAR(double(counts["passkey"]) / n, 0.75, 0.04);
  // A pure function of (seed, index, length).
  EXPECT_EQ(stream.sample(17, 512).tokens, stream.sample(17, 512).tokens);
  EXPECT_NE(stream.sample(17, 512).tokens, stream.sample(18, 512).tokens);
  EXPECT_THROW(stream.spec(0, 255), Error);  // no task of the mix fits
}

TEST(TrainData, BatchesReachTheTokenTargetAndAdvance) {
  DataStream stream(byte_tokenizer(), parse_task_mix("passkey"), 0.1f, 3, 4096);
  stream.set_position(10);
  const std::vector<TrainSequence> batch = stream.next_batch(300, 1000);
  int64_t tokens = 0;
  for (const auto& s : batch) tokens += int64_t(s.tokens.size()) - 1;
  EXPECT_GE(tokens, 1000);
  EXPECT_LT(tokens - (int64_t(batch.back().tokens.size()) - 1), 1000);  // the last sample was needed
  EXPECT_EQ(stream.position(), 10 + batch.size());
  EXPECT_EQ(batch[0].tokens, stream.sample(10, 300).tokens);
}

TEST(TrainData, RejectsSamplesLongerThanTheContext) {
  const DataStream stream(byte_tokenizer(), parse_task_mix("passkey"), 0.1f, 3, 200);
  EXPECT_THROW(stream.sample(0, 256), Error);
}

TrainerOptions tiny_run(const std::string& name) {
  TrainerOptions t;
  t.model.n_layers = 2;
  t.model.dim = 32;
  t.model.n_heads = 4;
  t.model.n_kv_heads = 2;
  t.model.ffn_dim = 64;
  t.model.context_length = 320;
  t.step.schedule = LrSchedule{2e-3f, 2, 6, 0.1f};
  t.step.micro_tokens = 600;
  t.batch_tokens = 700;
  t.tasks = "passkey";
  t.curriculum = "256:3,300";
  t.out_path = kvslim::testing::temp_path(name + ".gguf");
  t.out_type = DType::F32;
  t.checkpoint_path = kvslim::testing::temp_path(name + ".ckpt.gguf");
  std::filesystem::remove(t.checkpoint_path);
  return t;
}

std::vector<float> run_params(const TrainerOptions& options, int stop_after) {
  ThreadPool pool(2);
  Trainer trainer(options, pool);
  int steps = 0;
  trainer.run({}, [&] { return ++steps == stop_after; });
  return trainer.model().params();
}

TEST(TrainRun, ResumeEqualsUninterruptedRun) {
  const std::vector<float> straight = run_params(tiny_run("straight"), -1);

  TrainerOptions options = tiny_run("resumed");
  options.resume = true;  // no checkpoint yet: a fresh start
  {
    ThreadPool pool(2);
    Trainer first(options, pool);
    EXPECT_FALSE(first.resumed());
    int steps = 0;
    first.run({}, [&] { return ++steps == 4; });  // stops after step 4, in the second stage
    EXPECT_EQ(first.step(), 4);
  }
  // Settings that define the run come from the checkpoint, not from these options.
  options.step.schedule.lr = 1.0f;
  options.tasks = "vt";
  ThreadPool pool(2);
  Trainer second(options, pool);
  EXPECT_TRUE(second.resumed());
  EXPECT_EQ(second.step(), 4);
  EXPECT_EQ(second.options().tasks, "passkey");
  second.run({});
  EXPECT_EQ(second.step(), 6);
  const std::vector<float>& resumed = second.model().params();
  ASSERT_EQ(resumed.size(), straight.size());
  EXPECT_EQ(std::memcmp(resumed.data(), straight.data(), straight.size() * sizeof(float)), 0);
  // The exported model is the trained one.
  const auto exported = Model::load(options.out_path);
  EXPECT_EQ(exported->config().n_layers, 2);
  EXPECT_EQ(exported->output_is_tied(), true);
}

TEST(TrainRun, InitFromStartsAtTheModelsWeightsWithALongerContext) {
  TrainerOptions first = tiny_run("init-source");
  const std::vector<float> trained = run_params(first, -1);  // exported in f32: exact

  TrainerOptions options = tiny_run("init-continued");
  options.init_from = first.out_path;
  options.model.dim = 64;  // the file's shape wins
  options.model.context_length = 400;
  options.curriculum = "256:1,400";
  ThreadPool pool(2);
  Trainer trainer(options, pool);
  EXPECT_FALSE(trainer.resumed());
  EXPECT_EQ(trainer.options().model.dim, 32);
  EXPECT_EQ(trainer.options().model.context_length, 400);
  EXPECT_TRUE(trainer.options().tied_output);
  const std::vector<float>& start = trainer.model().params();
  ASSERT_EQ(start.size(), trained.size());
  EXPECT_EQ(std::memcmp(start.data(), trained.data(), trained.size() * sizeof(float)), 0);
  trainer.run({});
  EXPECT_EQ(trainer.step(), 6);
  EXPECT_EQ(Model::load(options.out_path)->config().context_length, 400);

  options.model.context_length = 300;  // shorter than the file's 320
  options.curriculum = "256";
  EXPECT_THROW(Trainer(options, pool), Error);
  options.model.context_length = 400;
  options.vocab_path = first.out_path;  // the tokenizer comes from the model
  EXPECT_THROW(Trainer(options, pool), Error);
}

TEST(TrainRun, GrownBlocksAreSpreadBetweenTheFilesBlocks) {
  EXPECT_EQ(grown_layer_sources(4, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(grown_layer_sources(4, 6), (std::vector<int>{0, 1, -1, 2, 3, -1}));
  EXPECT_EQ(grown_layer_sources(4, 5), (std::vector<int>{0, 1, 2, 3, -1}));
  EXPECT_EQ(grown_layer_sources(2, 6), (std::vector<int>{0, -1, -1, 1, -1, -1}));
  EXPECT_EQ(grown_layer_sources(1, 3), (std::vector<int>{0, -1, -1}));
  EXPECT_THROW(grown_layer_sources(4, 3), Error);
}

TEST(TrainRun, GrownModelComputesWhatTheFilesModelDoesThenTrainsItsNewBlocks) {
  TrainerOptions first = tiny_run("grow-source");
  run_params(first, -1);  // a trained 2-block model, exported in f32

  bool tied = false;
  const ModelConfig shape = read_model_shape(first.out_path, tied);
  TrainModel<float> source(shape, tied);
  load_model_params(first.out_path, source, shape.n_layers);
  ModelConfig grown_shape = shape;
  grown_shape.n_layers = 4;
  TrainModel<float> grown(grown_shape, tied);
  grown.init_params(9);
  load_model_params(first.out_path, grown, shape.n_layers);

  // Independent expectation: the file's blocks land at blk.0 and blk.2 (sources 0 new 1 new),
  // byte for byte.
  const auto tensor = [](const TrainModel<float>& m, const std::string& name) {
    const ParamTensor& t = m.layout().find(name);
    return std::vector<float>(m.params().begin() + t.offset, m.params().begin() + t.offset + t.size());
  };
  EXPECT_EQ(tensor(grown, "blk.2.attn_q.weight"), tensor(source, "blk.1.attn_q.weight"));
  EXPECT_EQ(tensor(grown, "blk.0.ffn_down.weight"), tensor(source, "blk.0.ffn_down.weight"));
  EXPECT_EQ(tensor(grown, "token_embd.weight"), tensor(source, "token_embd.weight"));

  // The same logits, exactly: a new block adds zero to the residual stream.
  ThreadPool pool(2);
  TrainSequence seq;
  for (int i = 0; i < 40; ++i) seq.tokens.push_back(int32_t((i * 37 + 11) % shape.n_vocab));
  seq.weights.assign(seq.tokens.size(), 1.0f);
  const std::vector<float> want = source.forward_logits({seq}, pool);
  const std::vector<float> got = grown.forward_logits({seq}, pool);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

  // Through the trainer: --grow-layers 2 gives 4 blocks whose new ones start at zero output
  // and are moved by training.
  TrainerOptions options = tiny_run("grow-continued");
  options.init_from = first.out_path;
  options.grow_layers = 2;
  Trainer trainer(options, pool);
  EXPECT_EQ(trainer.options().model.n_layers, 4);
  const auto max_abs = [](const std::vector<float>& v) {
    float m = 0;
    for (const float x : v) m = std::max(m, std::abs(x));
    return m;
  };
  EXPECT_EQ(max_abs(tensor(trainer.model(), "blk.1.attn_output.weight")), 0.0f);
  EXPECT_EQ(max_abs(tensor(trainer.model(), "blk.3.ffn_down.weight")), 0.0f);
  EXPECT_GT(max_abs(tensor(trainer.model(), "blk.1.attn_q.weight")), 0.0f);
  trainer.run({});
  EXPECT_GT(max_abs(tensor(trainer.model(), "blk.1.attn_output.weight")), 0.0f);
  EXPECT_GT(max_abs(tensor(trainer.model(), "blk.3.ffn_down.weight")), 0.0f);
  EXPECT_EQ(Model::load(options.out_path)->config().n_layers, 4);

  options.init_from.clear();  // nothing to grow
  EXPECT_THROW(Trainer(options, pool), Error);
  options.init_from = first.out_path;
  options.grow_layers = -1;
  EXPECT_THROW(Trainer(options, pool), Error);
}

TEST(TrainRun, HeldOutEvaluationCoversEveryTaskAndLength) {
  const auto model = Model::load(kvslim::testing::make_model(kvslim::testing::TinyModel{}));
  ThreadPool pool(2);
  EvalSpec spec;
  spec.tasks = {"passkey"};
  spec.lengths = {256, 300};
  spec.samples = 2;
  const std::vector<EvalScore> scores = evaluate_heldout(*model, spec, pool);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[1].task, "passkey");
  EXPECT_EQ(scores[1].length, 300);
  EXPECT_EQ(scores[1].samples, 2);
  // A random model does not produce a 5-digit key.
  EXPECT_EQ(scores[0].score, 0.0);
  spec.samples = 0;
  EXPECT_THROW(evaluate_heldout(*model, spec, pool), Error);
  spec.samples = 1;
  spec.lengths = {100};  // below passkey's minimum
  EXPECT_THROW(evaluate_heldout(*model, spec, pool), Error);
}

TEST(TrainRun, RejectsInconsistentOptions) {
  ThreadPool pool(1);
  TrainerOptions t = tiny_run("bad");
  t.curriculum = "256:3,512";  // beyond the context of 320
  EXPECT_THROW(Trainer(t, pool), Error);
  t = tiny_run("bad");
  t.checkpoint_path.clear();
  t.resume = true;
  EXPECT_THROW(Trainer(t, pool), Error);
  t = tiny_run("bad");
  t.eval_every = 1;
  t.eval.lengths = {256};  // niah_single_1 needs 512
  EXPECT_THROW(Trainer(t, pool), Error);
  t = tiny_run("bad");
  t.out_path.clear();
  EXPECT_THROW(Trainer(t, pool), Error);
}

}  // namespace
}  // namespace kvslim::train
