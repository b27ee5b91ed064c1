// Compressed-KV files: save -> load -> continue gives bit-identical logits and answers to never
// saving, for methods with and without carried state; a file holds about the kept KV; another
// model's file, a truncated or corrupt one is refused with one line and nothing changed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>

#include "gguf/gguf.h"

#include "engine/kv_file.h"
#include "engine/live_session.h"
#include "model/model.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::vector<int32_t> tokens(int n, int n_vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + 11 + salt * 13) % (n_vocab - 3);
  return t;
}

std::vector<float> copy(const float* logits, int n) { return std::vector<float>(logits, logits + n); }

struct Fixture {
  std::unique_ptr<Model> model = Model::load(testing::make_model(testing::TinyModel{}));
  ThreadPool pool{2};
  EngineOptions options;
  SamplerParams greedy;
  Fixture() { greedy.temperature = 0; }
  int n_vocab() const { return model->config().n_vocab; }
};

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

class KvFileContinue : public ::testing::TestWithParam<std::string> {};

// Two turns and answers, save, then a third turn: the loaded copy and the original agree bit for
// bit on the third turn's logits and answer.
TEST_P(KvFileContinue, SaveLoadContinueEqualsNeverSaving) {
  Fixture f;
  CompressionOptions c;
  const std::string spec = GetParam();
  const size_t colon = spec.find(':');
  c.press = spec.substr(0, colon);
  if (colon != std::string::npos) c.press_options = {spec.substr(colon + 1)};
  c.budget = 16;
  LiveSession original(*f.model, f.pool, f.options, c, f.greedy);
  std::vector<int32_t> conv = tokens(40, f.n_vocab(), 1);
  original.prompt(conv, 5);
  original.answer(5);
  conv = original.transcript();
  for (int32_t t : tokens(12, f.n_vocab(), 2)) conv.push_back(t);
  original.prompt(conv, 5);
  original.answer(5);
  const std::string path = testing::temp_path("continue-" + c.press + ".kv");
  original.save(path);

  const auto loaded = LiveSession::load(path, *f.model, f.pool, f.options, f.greedy);
  EXPECT_EQ(loaded->compression().press, c.press);
  EXPECT_EQ(loaded->transcript(), original.transcript());
  std::vector<int32_t> third = original.transcript();
  for (int32_t t : tokens(9, f.n_vocab(), 3)) third.push_back(t);
  const std::vector<float> a = copy(original.prompt(third, 6), f.n_vocab());
  const std::vector<float> b = copy(loaded->prompt(third, 6), f.n_vocab());
  ASSERT_EQ(a, b);
  EXPECT_EQ(loaded->last_turn().reused, original.last_turn().reused);
  EXPECT_EQ(original.answer(6).tokens, loaded->answer(6).tokens);
  ASSERT_TRUE(original.session() && loaded->session());
  EXPECT_EQ(original.session()->kv().total_tokens(), loaded->session()->kv().total_tokens());
}

INSTANTIATE_TEST_SUITE_P(Methods, KvFileContinue,
                         ::testing::Values("full", "snapkv:window=4", "h2o", "tova", "keydiff:block=8", "lagkv:lag=8",
                                           "streaming_llm", "rocketkv:mt=true", "rocketkv"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find(':'));
                           if (info.param.find("mt=true") != std::string::npos) n += "_mt";
                           return n;
                         });

// The file is the kept K/V (a key row and a value row in the pages' stored types, and a position
// per kept token) plus the history,
// the last logits and headers: compressing to 16 tokens per head shrinks it accordingly.
TEST(KvFile, SizeFollowsTheKeptTokens) {
  Fixture f;
  const auto conv = tokens(200, f.n_vocab());
  auto size_with = [&](CompressionOptions c) {
    LiveSession live(*f.model, f.pool, f.options, c, f.greedy);
    live.prompt(conv, 0);
    const std::string path = testing::temp_path("size-" + c.press + ".kv");
    live.save(path);
    return std::pair{std::filesystem::file_size(path), live.session()->kv().total_tokens()};
  };
  CompressionOptions full, snap;
  snap.press = "snapkv";
  snap.budget = 40;
  const auto [full_bytes, full_tokens] = size_with(full);
  const auto [snap_bytes, snap_tokens] = size_with(snap);
  const ModelConfig& config = f.model->config();
  const uint64_t per_token =
      row_bytes(f.options.cache_type_k, config.head_dim) + row_bytes(f.options.cache_type_v, config.head_dim) + 8;
  const uint64_t fixed = 200 * 4 + uint64_t(config.n_vocab) * 4;
  for (auto [bytes, kept] : {std::pair{full_bytes, full_tokens}, std::pair{snap_bytes, snap_tokens}}) {
    EXPECT_GE(bytes, uint64_t(kept) * per_token + fixed);
    EXPECT_LE(bytes, uint64_t(kept) * per_token + fixed + 16384);  // headers and alignment
  }
  EXPECT_EQ(snap_tokens * 5, full_tokens);
}

// The file keeps the pages' own types: a bf16/f16 session loads bit for bit into one of the
// same types, and into f32 pages as exactly the numbers attention read (the stored rows decoded).
TEST(KvFile, PagesKeepTheirTypeAndConvertOnLoad) {
  Fixture f;
  f.options.cache_type_k = DType::BF16;
  f.options.cache_type_v = DType::F16;
  CompressionOptions c;
  c.press = "snapkv";
  c.budget = 40;
  LiveSession original(*f.model, f.pool, f.options, c, f.greedy);
  original.prompt(tokens(100, f.n_vocab(), 4), 0);
  const std::string path = testing::temp_path("typed.kv");
  original.save(path);
  EngineOptions f32_pages = f.options;
  f32_pages.cache_type_k = f32_pages.cache_type_v = DType::F32;
  const auto same = LiveSession::load(path, *f.model, f.pool, f.options, f.greedy);
  const auto wide = LiveSession::load(path, *f.model, f.pool, f32_pages, f.greedy);
  const PagedKvCache& a = original.session()->kv();
  const PagedKvCache& b = same->session()->kv();
  const PagedKvCache& w = wide->session()->kv();
  const int d = a.head_dim();
  const size_t kb = row_bytes(DType::BF16, d), vb = row_bytes(DType::F16, d);
  std::vector<float> ka(d), va(d), kw(d), vw(d);
  for (int l = 0; l < a.n_layers(); ++l)
    for (int h = 0; h < a.n_kv_heads(); ++h) {
      const HeadCache &x = a.head(l, h), &y = b.head(l, h), &z = w.head(l, h);
      ASSERT_EQ(x.size(), y.size());
      ASSERT_EQ(x.size(), z.size());
      EXPECT_EQ(y.key_type(), DType::BF16);
      EXPECT_EQ(z.key_type(), DType::F32);
      for (int64_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(x.position(i), y.position(i));
        ASSERT_EQ(x.position(i), z.position(i));
        ASSERT_EQ(std::memcmp(x.key_data(i), y.key_data(i), kb), 0);
        ASSERT_EQ(std::memcmp(x.value_data(i), y.value_data(i), vb), 0);
        convert_to_f32(DType::BF16, x.key_data(i), ka.data(), d);
        convert_to_f32(DType::F16, x.value_data(i), va.data(), d);
        ASSERT_EQ(std::memcmp(ka.data(), z.key_f32(i, kw.data()), sizeof(float) * d), 0);
        ASSERT_EQ(std::memcmp(va.data(), z.value_f32(i, vw.data()), sizeof(float) * d), 0);
      }
    }
}

struct SavedFile {
  Fixture f;
  std::string path = testing::temp_path("refuse.kv");
  std::unique_ptr<LiveSession> live;
  SavedFile() {
    CompressionOptions c;
    c.press = "h2o";
    c.budget = 12;
    live = std::make_unique<LiveSession>(*f.model, f.pool, f.options, c, f.greedy);
    live->prompt(tokens(30, f.n_vocab()), 2);
    live->answer(2);
    live->save(path);
  }
  std::string refusal(const std::string& file) {
    try {
      LiveSession::load(file, *f.model, f.pool, f.options, f.greedy);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST(KvFile, AnotherModelsFileIsRefused) {
  SavedFile s;
  testing::TinyModel other;
  other.seed = 99;
  const auto model = Model::load(testing::make_model(other));
  try {
    LiveSession::load(s.path, *model, s.f.pool, s.f.options, s.f.greedy);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(KvFile, TruncatedAndCorruptFilesAreRefusedWithOneLine) {
  SavedFile s;
  const std::vector<char> bytes = read_bytes(s.path);
  const std::string bad = testing::temp_path("bad.kv");
  for (size_t cut : {size_t(0), size_t(10), bytes.size() / 3, bytes.size() - 1}) {
    write_bytes(bad, std::vector<char>(bytes.begin(), bytes.begin() + int64_t(cut)));
    const std::string why = s.refusal(bad);
    EXPECT_NE(why, "") << "truncated to " << cut;
    EXPECT_NE(why.find(bad), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // One flipped bit inside tensor data (found by its bytes): a key, a position, H2O's sums.
  std::vector<size_t> inside;
  {
    const gguf::File file = gguf::File::open(s.path);
    for (const char* name : {"kv.0.0.k", "kv.1.1.pos", "press.f32.h2o.sums"}) {
      const gguf::TensorInfo* t = file.find_tensor(name);
      ASSERT_TRUE(t) << name;
      const char* data = reinterpret_cast<const char*>(file.tensor_data(*t));
      const auto it = std::search(bytes.begin(), bytes.end(), data, data + std::min<uint64_t>(t->n_bytes, 24));
      ASSERT_NE(it, bytes.end());
      inside.push_back(size_t(it - bytes.begin()) + 2);
    }
  }
  for (size_t at : inside) {
    std::vector<char> flipped = bytes;
    flipped[at] ^= 0x10;
    write_bytes(bad, flipped);
    EXPECT_NE(s.refusal(bad), "") << "flip at " << at;
  }
  EXPECT_NE(s.refusal(testing::temp_path("does-not-exist.kv")), "");
  // A model file is not a KV file.
  EXPECT_NE(s.refusal(testing::make_model(testing::TinyModel{})).find("not a kvslim KV file"), std::string::npos);
  // The original still loads.
  EXPECT_EQ(s.refusal(s.path), "");
}

// A failed save leaves the previous file whole (the writer renames a complete temporary file).
TEST(KvFile, SavingOverAFileIsAtomicAndNothingToSaveIsAnError) {
  SavedFile s;
  const std::vector<char> before = read_bytes(s.path);
  CompressionOptions c;
  LiveSession empty(*s.f.model, s.f.pool, s.f.options, c, s.f.greedy);
  EXPECT_THROW(empty.save(s.path), Error);
  EXPECT_EQ(read_bytes(s.path), before);
  EXPECT_THROW(s.live->save("/nonexistent-dir/x.kv"), Error);
}

}  // namespace
}  // namespace kvslim
