#include "server/slot.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/kv_file.h"
#include "engine/kv_layers_json.h"
#include "kv/page_pool.h"
#include "server/text_stream.h"
#include "util/error.h"

namespace kvslim::server {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// log p(id) for the sampled token and the k most likely tokens, from the model's raw logits.
void add_logprobs(const float* logits, int n_vocab, int k, TokenEvent& event) {
  const float max = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i] - max));
  const float log_z = max + float(std::log(sum));
  event.logprob = logits[event.id] - log_z;
  if (k <= 0) return;
  std::vector<int32_t> ids(n_vocab);
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int i = 0; i < k; ++i) event.top.push_back({ids[i], logits[ids[i]] - log_z});
}

}  // namespace

std::string compression_key(const CompressionOptions& c) {
  std::vector<std::string> options = c.press_options;
  std::sort(options.begin(), options.end());
  return fmt::format("{}|{}|{}|{}|{}", c.press, fmt::join(options, ","), c.budget ? std::to_string(*c.budget) : "",
                     c.ratio ? fmt::format("{}", *c.ratio) : "", to_string(c.prefill_evict));
}

uint64_t kv_bytes_for(const ModelConfig& config, const EngineOptions& engine, int64_t tokens) {
  const PagePool probe(config.head_dim, engine.page_tokens);  // maps nothing until acquire()
  const int64_t pages = (tokens + engine.page_tokens - 1) / engine.page_tokens + 1;
  return uint64_t(config.n_layers) * config.n_kv_heads * pages * probe.page_bytes();
}

Slot::Slot(int id, const Model& model, ThreadPool& pool, const EngineOptions& engine)
    : id_(id), model_(model), pool_(pool), engine_(engine) {}

const std::vector<int32_t>& Slot::tokens() const {
  static const std::vector<int32_t> none;
  return session_ ? session_->history() : none;
}

size_t Slot::reusable(const std::vector<int32_t>& prompt, const std::string& key) const {
  if (!session_ || key != key_) return 0;
  const std::vector<int32_t>& held = session_->history();
  const size_t n = std::min(prompt.size(), held.size());
  size_t common = 0;
  while (common < n && prompt[common] == held[common]) ++common;
  common = common == prompt.size() ? common - 1 : common;
  // A sliding-window layer cannot go back before what it still holds: start afresh instead.
  return common < held.size() && !session_->can_rewind(int64_t(common)) ? 0 : common;
}

void Slot::reset() {
  session_.reset();
  press_.reset();
  key_.clear();
}

uint64_t Slot::kv_bytes() const { return session_ ? session_->kv().bytes_in_use() : 0; }

uint64_t Slot::kv_peak_bytes() const { return session_ ? session_->kv().peak_bytes() : 0; }

int64_t Slot::cached_total() const { return session_ ? session_->kv().total_tokens() : 0; }

void Slot::start(std::shared_ptr<GenerationJob> job) {
  job_ = std::move(job);
  begun_ = false;
  logits_ = nullptr;
  result_ = JobResult{};
  result_.slot = id_;
  result_.admitted = Clock::now();
  result_.queue_ms = std::chrono::duration<double, std::milli>(result_.admitted - job_->submitted).count();
  sampler_ = std::make_unique<Sampler>(job_->sampling, model_.config().n_vocab);
  text_ = std::make_unique<TextStream>(job_->stop);
  channels_.reset();
  if (job_->split_reasoning)
    if (const std::optional<HarmonyTokens> harmony = HarmonyTokens::find(model_.tokenizer()))
      channels_.emplace(*harmony);
  last_used_ = Clock::now();
}

void Slot::begin() {
  const GenerationJob& job = *job_;
  const std::string key = compression_key(job.compression);
  const size_t reuse = reusable(job.prompt, key);
  const auto start = Clock::now();
  const std::vector<int32_t> turn(job.prompt.begin() + int64_t(reuse), job.prompt.end());
  if (reuse > 0) {
    // A later turn of the same conversation: keep the common prefix (rewinding whatever the new
    // prompt no longer has) and run the rest as one turn, with the method's multi-turn rule.
    session_->check_turn_fits(int64_t(turn.size()), int64_t(reuse));
    if (reuse < session_->history().size()) session_->rewind(int64_t(reuse));
  } else {
    reset();
    PreparedCompression c = job.compression.prepare();
    press_ = std::move(c.press);
    session_ = std::make_unique<Session>(model_, pool_,
                                         SessionOptions{.engine = engine_,
                                                        .capacity = engine_.context,
                                                        .press = press_.get(),
                                                        .budget = c.budget_for(int64_t(job.prompt.size())),
                                                        .seed = job.sampling.seed});
    key_ = key;
    // The options as the method runs them: a KV file of a block-wise slot restores block-wise.
    press_options_ = std::move(c.options);
  }
  // The turn runs one block per step (prefill_block), so other slots' tokens and prompts take
  // turns with it instead of waiting for the whole prompt.
  session_->begin_prefill(turn, job.n_predict);
  result_.n_reused = int(reuse);
  result_.prefill_ms = ms_since(start);
  begun_ = true;
}

void Slot::prefill_block() {
  const PagedKvCache& kv = session_->kv();
  const int64_t heads = int64_t(kv.n_layers()) * kv.n_kv_heads();
  const int64_t before = kv.total_tokens();
  const auto start = Clock::now();
  const int n = session_->prefill_step();
  // prompt_ms counts this slot's own blocks, not the other slots' steps in between.
  result_.prefill_ms += ms_since(start);
  evicted_last_step_ = before + n * heads - kv.total_tokens();
  if (session_->prefilling()) return;
  const GenerationJob& job = *job_;
  logits_ = session_->last_logits();
  result_.score_ms = session_->score_ms();
  result_.n_prompt = int(job.prompt.size());
  result_.kept_tokens = double(kv.total_tokens()) / double(heads);
  result_.press = job.compression.press;
  result_.budget = session_->budget() == kNoBudget ? 0 : session_->budget();
  result_.kv_bytes_full =
      kv_bytes_for(model_.config(), engine_, int64_t(job.prompt.size())) - kv_bytes_for(model_.config(), engine_, 0);
  result_.kv_layers = kv_layers_json(kv);
  if (job.kv_map) result_.kv_map = kept_map();
  decode_start_ = Clock::now();
}

nlohmann::json Slot::kept_map() const {
  const PagedKvCache& kv = session_->kv();
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < kv.n_layers(); ++l) {
    nlohmann::json heads = nlohmann::json::array();
    for (int h = 0; h < kv.n_kv_heads(); ++h) {
      const HeadCache& head = kv.head(l, h);
      std::vector<int64_t> positions(size_t(head.size()));
      for (int64_t i = 0; i < head.size(); ++i) positions[size_t(i)] = head.position(i);
      std::sort(positions.begin(), positions.end());
      // Runs [start, end) keep the map small: a budget keeps a few long runs.
      nlohmann::json runs = nlohmann::json::array();
      for (size_t i = 0; i < positions.size();) {
        size_t j = i + 1;
        while (j < positions.size() && positions[j] == positions[j - 1] + 1) ++j;
        runs.push_back({positions[i], positions[j - 1] + 1});
        i = j;
      }
      heads.push_back(std::move(runs));
    }
    layers.push_back(std::move(heads));
  }
  return {{"n_positions", session_->n_past()},
          {"n_layers", kv.n_layers()},
          {"n_kv_heads", kv.n_kv_heads()},
          {"layers", std::move(layers)}};
}

void Slot::finish(const std::string& reason, std::optional<std::string> error) {
  const std::string rest = text_ ? text_->flush() : std::string();
  if (!rest.empty()) {
    TokenEvent tail;
    tail.id = -1;
    tail.text = rest;
    job_->push(std::move(tail));
  }
  result_.finish_reason = reason;
  if (begun_ && logits_) result_.decode_ms = ms_since(decode_start_);  // the prompt was prefilled
  if (session_) {
    result_.kv_bytes_peak = session_->kv().peak_bytes();
    result_.kv_bytes_final = session_->kv().bytes_in_use();
  }
  error_ = std::move(error);
  sampler_.reset();
  text_.reset();
  logits_ = nullptr;
  last_used_ = Clock::now();
}

void Slot::deliver() {
  job_->finish(std::move(result_), std::move(error_));
  job_.reset();
  error_.reset();
}

bool Slot::generate_one() {
  const GenerationJob& job = *job_;
  const Tokenizer& tokenizer = model_.tokenizer();
  const int n_vocab = model_.config().n_vocab;
  if (result_.n_generated >= job.n_predict) {
    finish("length");
    return true;
  }
  const int32_t token = sampler_->sample(logits_, session_->history());
  if (tokenizer.is_end_of_generation(token)) {
    finish("stop");
    return true;
  }
  TokenEvent event;
  event.id = token;
  event.piece = tokenizer.token_to_piece(token);
  if (job.logprobs) add_logprobs(logits_, n_vocab, job.top_logprobs, event);
  if (channels_) {
    HarmonyChannels::Text t = channels_->push(token, event.piece);
    event.reasoning = std::move(t.reasoning);
    event.text = text_->push(t.answer);
  } else {
    event.text = text_->push(event.piece);
  }
  ++result_.n_generated;
  const bool stopped = text_->stopped();
  job_->push(std::move(event));
  if (stopped) {
    finish("stop");
    return true;
  }
  if (result_.n_generated >= job.n_predict) {  // the last token needs no forward pass
    finish("length");
    return true;
  }
  const PagedKvCache& kv = session_->kv();
  int64_t largest_head = 0;
  for (int l = 0; l < kv.n_layers(); ++l) largest_head = std::max(largest_head, kv.n_tokens(l));
  if (largest_head >= kv.capacity()) {
    finish("length");
    return true;
  }
  const int64_t before = kv.total_tokens();
  logits_ = session_->decode(token);
  evicted_last_step_ = before + int64_t(kv.n_layers()) * kv.n_kv_heads() - kv.total_tokens();
  return false;
}

bool Slot::step() {
  evicted_last_step_ = 0;
  if (job_->cancelled.load()) {
    // A session left half-way through a prefill holds a turn it never finished: drop it.
    if (session_ && session_->prefilling()) reset();
    finish("cancelled");
    return true;
  }
  try {
    if (!begun_) begin();
    if (session_->prefilling()) {
      prefill_block();
      if (session_->prefilling()) return false;
      if (job_->n_predict == 0) {
        finish("length");
        return true;
      }
      return false;
    }
    return generate_one();
  } catch (const std::exception& e) {
    // The cache may be half-written: drop it so the next request starts clean.
    reset();
    finish("error", std::string(e.what()));
    return true;
  }
}

nlohmann::json Slot::info(bool busy) const {
  nlohmann::json out = {{"id", id_}, {"n_ctx", engine_.context}, {"is_processing", busy}};
  if (busy) return out;  // the scheduler thread owns a busy slot's session
  out["n_tokens"] = tokens().size();
  out["kv_bytes"] = kv_bytes();
  if (session_) {
    const PagedKvCache& kv = session_->kv();
    out["press"] = key_.substr(0, key_.find('|'));
    out["budget"] = session_->budget() == kNoBudget ? 0 : session_->budget();
    out["kept_tokens"] = double(kv.total_tokens()) / (kv.n_layers() * kv.n_kv_heads());
  }
  return out;
}

nlohmann::json Slot::save(const std::string& path) const {
  if (!session_) fail("slot {} holds nothing to save", id_);
  const auto start = Clock::now();
  const Session::Snapshot snapshot = session_->snapshot();
  const std::string press = key_.substr(0, key_.find('|'));
  KvFileMeta meta{press, press_options_, session_->budget(), snapshot.turns, {}, {}};
  write_kv_file(path, *session_, meta, model_);
  return {{"id_slot", id_},
          {"n_saved", snapshot.history.size()},
          {"kv_bytes", kv_bytes()},
          {"timings", {{"save_ms", ms_since(start)}}}};
}

nlohmann::json Slot::restore(const std::string& path) {
  const auto start = Clock::now();
  const KvFileContents contents = read_kv_file(path, model_, engine_);
  CompressionOptions c;
  c.press = contents.meta.press;
  c.press_options = contents.meta.press_options;
  // prefill=block came from --prefill-evict block: key the slot as such requests are keyed.
  if (std::erase(c.press_options, std::string("prefill=block")) > 0) c.prefill_evict = PrefillEvict::Block;
  if (contents.meta.budget != kNoBudget) c.budget = contents.meta.budget;
  std::unique_ptr<Press> press = c.prepare().press;
  auto session = std::make_unique<Session>(
      model_, pool_,
      SessionOptions{
          .engine = engine_, .capacity = engine_.context, .press = press.get(), .budget = contents.meta.budget});
  apply_kv_file(contents, *session);
  // Everything read and applied: only now does the slot change.
  session_ = std::move(session);
  press_ = std::move(press);
  press_options_ = contents.meta.press_options;
  key_ = compression_key(c);
  last_used_ = Clock::now();
  return {{"id_slot", id_},
          {"n_restored", session_->history().size()},
          {"press", c.press},
          {"kv_bytes", kv_bytes()},
          {"timings", {{"restore_ms", ms_since(start)}}}};
}

}  // namespace kvslim::server
