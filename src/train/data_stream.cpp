#include "train/data_stream.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/byte_vocab.h"
#include "tasks/rng.h"
#include "train/dense_tasks.h"
#include "util/error.h"

namespace kvslim::train {

std::vector<TaskWeight> parse_task_mix(const std::string& spec) {
  std::vector<TaskWeight> mix;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, comma - begin);
    const size_t colon = item.find(':');
    TaskWeight tw{item.substr(0, colon), 1.0};
    task_min_tokens(tw.task);  // throws listing the valid names
    if (colon != std::string::npos) {
      const std::string w = item.substr(colon + 1);
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), tw.weight);
      if (ec != std::errc() || end != w.data() + w.size() || !(tw.weight > 0))
        fail("task mix '{}': weight '{}' of {} is not a positive number", spec, w, tw.task);
    }
    mix.push_back(tw);
    begin = comma + 1;
  }
  return mix;
}

Tokenizer load_tokenizer(const std::string& vocab_path) {
  if (!vocab_path.empty()) return Tokenizer::from_gguf(gguf::File::open(vocab_path));
  const auto path =
      std::filesystem::temp_directory_path() / ("kvslim-byte-vocab-" + std::to_string(getpid()) + ".gguf");
  gguf::Writer w;
  add_byte_vocab(w);
  w.write(path.string());
  try {
    Tokenizer tokenizer = Tokenizer::from_gguf(gguf::File::open(path.string()));
    std::filesystem::remove(path);
    return tokenizer;
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
}

int64_t task_min_tokens(const std::string& task) {
  if (task == kInductionTask) return kInductionMinTokens;
  if (is_dense_task(task)) return kDenseMinTokens;
  return tasks::find_task(task).min_tokens;
}

TrainSequence induction_sequence(uint64_t seed, int64_t length, const Tokenizer& tokenizer) {
  if (length < kInductionMinTokens)
    fail("induction sequences need at least {} tokens, not {}", kInductionMinTokens, length);
  tasks::Rng rng(seed);
  TrainSequence seq;
  if (tokenizer.add_bos_by_default()) seq.tokens.push_back(tokenizer.bos_id());
  const int64_t start = int64_t(seq.tokens.size());
  const int64_t period = rng.between(8, length / 2);
  while (int64_t(seq.tokens.size()) < start + period) {
    const int32_t id = int32_t(rng.below(uint64_t(tokenizer.n_vocab())));
    if (id != tokenizer.bos_id() && id != tokenizer.eos_id() && !tokenizer.is_end_of_generation(id))
      seq.tokens.push_back(id);
  }
  while (int64_t(seq.tokens.size()) < length)
    seq.tokens.push_back(seq.tokens[size_t(int64_t(seq.tokens.size()) - period)]);
  seq.weights.assign(seq.tokens.size(), 1.0f);
  std::fill_n(seq.weights.begin(), start + period, 0.0f);
  return seq;
}

std::string task_mix_to_string(const std::vector<TaskWeight>& mix) {
  std::string out;
  for (const TaskWeight& tw : mix) out += fmt::format("{}{}:{}", out.empty() ? "" : ",", tw.task, tw.weight);
  return out;
}

TrainSequence training_sequence(const tasks::TaskSample& sample, const Tokenizer& tokenizer, float prompt_weight) {
  if (tokenizer.eos_id() < 0) fail("the tokenizer has no end-of-sequence token to end training answers with");
  const std::string prompt = sample.prompt();
  std::string answer;
  for (const std::string& a : sample.answers) answer += (answer.empty() ? "" : ", ") + a;
  if (!prompt.empty() && !std::isspace(static_cast<unsigned char>(prompt.back()))) answer = " " + answer;

  // Generation starts from exactly the prompt's own tokens, so they come first. The answer is
  // tokenized in context when that keeps them (encoding it alone would give it a SentencePiece
  // word-start prefix); when the tokenizer would merge them with the answer (a byte-level BPE
  // joining the prompt's trailing space to the first answer word), it is tokenized on its own.
  const bool bos = tokenizer.add_bos_by_default();
  const std::vector<int32_t> prompt_tokens = tokenizer.encode(prompt, bos, false);
  TrainSequence seq;
  seq.tokens = tokenizer.encode(prompt + answer, bos, false);
  if (seq.tokens.size() <= prompt_tokens.size() ||
      !std::equal(prompt_tokens.begin(), prompt_tokens.end(), seq.tokens.begin())) {
    seq.tokens = prompt_tokens;
    const std::vector<int32_t> alone = tokenizer.encode(answer, false, false);
    seq.tokens.insert(seq.tokens.end(), alone.begin(), alone.end());
  }
  seq.tokens.push_back(tokenizer.eos_id());
  seq.weights.assign(seq.tokens.size(), 1.0f);
  std::fill_n(seq.weights.begin(), prompt_tokens.size(), prompt_weight);
  seq.weights[0] = 0;  // nothing predicts the first token
  return seq;
}

DataStream::DataStream(const Tokenizer& tokenizer, std::vector<TaskWeight> mix, float prompt_weight, uint64_t seed,
                       int64_t context_length)
    : tokenizer_(tokenizer),
      mix_(std::move(mix)),
      prompt_weight_(prompt_weight),
      seed_(seed),
      context_length_(context_length) {
  if (mix_.empty()) fail("the training task mix is empty");
  if (!(prompt_weight >= 0 && prompt_weight <= 1)) fail("prompt loss weight must be in [0, 1], got {}", prompt_weight);
}

DataStream::SampleSpec DataStream::spec(uint64_t index, int64_t length) const {
  tasks::Rng rng(seed_ * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xD1B54A32D192ED03ull);
  double total = 0;
  for (const TaskWeight& tw : mix_)
    if (task_min_tokens(tw.task) <= length) total += tw.weight;
  if (total == 0) fail("no task of the mix '{}' fits prompts of {} tokens", task_mix_to_string(mix_), length);
  double pick = double(rng.next() >> 11) * 0x1.0p-53 * total;
  const TaskWeight* chosen = nullptr;
  for (const TaskWeight& tw : mix_) {
    if (task_min_tokens(tw.task) > length) continue;
    chosen = &tw;
    if ((pick -= tw.weight) < 0) break;
  }
  SampleSpec spec;
  spec.task = chosen->task;
  spec.target_tokens = rng.between(std::max(task_min_tokens(chosen->task), length / 2), length);
  spec.seed = kFirstTrainingSeed + (rng.next() >> 2);
  return spec;
}

TrainSequence DataStream::sample(uint64_t index, int64_t length) const {
  const SampleSpec s = spec(index, length);
  const TrainSequence seq = s.task == kInductionTask ? induction_sequence(s.seed, s.target_tokens, tokenizer_)
                            : is_dense_task(s.task)
                                ? dense_sequence(s.task, s.seed, s.target_tokens, tokenizer_, prompt_weight_)
                                : training_sequence(tasks::make_sample(s.task, s.target_tokens, s.seed, tokenizer_),
                                                    tokenizer_, prompt_weight_);
  if (int64_t(seq.tokens.size()) - 1 > context_length_)
    fail(
        "a {} sample of {} tokens (prompt, answer and EOS) exceeds the model's context of {}; raise the context "
        "or shorten the curriculum",
        s.task, seq.tokens.size(), context_length_);
  return seq;
}

std::string DataStream::sample_text(uint64_t index, int64_t length) const {
  const SampleSpec s = spec(index, length);
  if (s.task == kInductionTask) return "";
  if (is_dense_task(s.task)) return dense_text(s.task, s.seed, s.target_tokens, tokenizer_);
  const tasks::TaskSample sample = tasks::make_sample(s.task, s.target_tokens, s.seed, tokenizer_);
  std::string answer;
  for (const std::string& a : sample.answers) answer += (answer.empty() ? " " : ", ") + a;
  return sample.prompt() + answer;
}

std::vector<TrainSequence> DataStream::next_batch(int64_t length, int64_t batch_tokens) {
  std::vector<TrainSequence> batch;
  int64_t tokens = 0;
  while (batch.empty() || tokens < batch_tokens) {
    batch.push_back(sample(position_++, length));
    tokens += int64_t(batch.back().tokens.size()) - 1;
  }
  return batch;
}

}  // namespace kvslim::train
