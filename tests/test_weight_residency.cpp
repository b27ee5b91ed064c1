// Where a model's weights live (model/weight_residency.h, gguf::Residency): the rule that picks
// memory or a mapping, the MemAvailable parser, and that both give the same bytes and logits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "forward_checks.h"
#include "gguf/gguf.h"
#include "model/weight_residency.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using gguf::Residency;
using testing::make_model;
using testing::temp_path;
using testing::TinyModel;

constexpr uint64_t kGiB = uint64_t(1) << 30;

TEST(WeightResidency, EnvironmentForcesEitherWay) {
  EXPECT_EQ(choose_weight_residency("1", 100 * kGiB, 1 * kGiB), Residency::Mapped);
  EXPECT_EQ(choose_weight_residency("1", 1, 100 * kGiB), Residency::Mapped);
  EXPECT_EQ(choose_weight_residency("0", 100 * kGiB, 1 * kGiB), Residency::InMemory);
  EXPECT_EQ(choose_weight_residency("0", 1, std::nullopt), Residency::InMemory);
}

TEST(WeightResidency, UnsetReadsIntoMemoryUpToThreeQuartersOfAvailable) {
  // 4 GiB available: 3 GiB is the largest file read into memory.
  EXPECT_EQ(choose_weight_residency(nullptr, 3 * kGiB, 4 * kGiB), Residency::InMemory);
  EXPECT_EQ(choose_weight_residency(nullptr, 3 * kGiB + 1, 4 * kGiB), Residency::Mapped);
  EXPECT_EQ(choose_weight_residency(nullptr, 1, 0), Residency::Mapped);
  EXPECT_EQ(choose_weight_residency(nullptr, 1, std::nullopt), Residency::Mapped);  // unknown: map
}

TEST(WeightResidency, OtherValuesAreRefusedByName) {
  for (const char* bad : {"", "yes", "2", "on", " 1"}) {
    try {
      choose_weight_residency(bad, 1, kGiB);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KVSLIM_MMAP"), std::string::npos) << e.what();
    }
  }
}

TEST(WeightResidency, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       24590432 kB\nMemFree:         1000 kB\nMemAvailable:   20971520 kB\nBuffers: 12 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), uint64_t(20971520) * 1024);
  // Only a line that starts with the key counts.
  EXPECT_EQ(parse_mem_available("XMemAvailable: 5 kB\nMemAvailable: 7 kB\n"), uint64_t(7) * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 5 kB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: lots kB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 5 MB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 5"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 99999999999999999999 kB\n"), std::nullopt);
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> file_bytes_u8(const std::string& path) {
  const std::vector<char> bytes = file_bytes(path);
  return {bytes.begin(), bytes.end()};
}

// The copy holds the file's bytes and stays as it was when the file on disk changes afterwards
// (a mapping would not promise that).
TEST(WeightResidency, InMemoryCopyHoldsTheFilesBytes) {
  const std::string path = make_model(TinyModel{});
  const std::string copy_path = temp_path("residency-copy.gguf");
  std::filesystem::copy_file(path, copy_path, std::filesystem::copy_options::overwrite_existing);
  const std::vector<char> before = file_bytes(copy_path);

  const gguf::File file = gguf::File::open(copy_path, Residency::InMemory);
  EXPECT_EQ(file.residency(), Residency::InMemory);
  ASSERT_EQ(file.file_size(), before.size());
  const gguf::TensorInfo& first = file.tensors().front();
  const uint8_t* data = file.tensor_data(first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % file.alignment(), 0u);
  std::vector<uint8_t> first_bytes(data, data + first.n_bytes);

  std::ofstream(copy_path, std::ios::binary | std::ios::trunc) << "not a model any more";
  EXPECT_EQ(std::vector<uint8_t>(data, data + first.n_bytes), first_bytes);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
}

TEST(WeightResidency, MappedIsTheDefaultOfFileOpen) {
  const gguf::File file = gguf::File::open(make_model(TinyModel{}));
  EXPECT_EQ(file.residency(), Residency::Mapped);
  EXPECT_EQ(gguf::File::from_bytes(file_bytes_u8(make_model(TinyModel{}))).residency(), Residency::InMemory);
}

TEST(WeightResidency, MissingFileNamedInMemoryToo) {
  try {
    gguf::File::open(temp_path("no-such-model.gguf"), Residency::InMemory);
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-model.gguf"), std::string::npos) << e.what();
  }
}

// Sets an environment variable for one scope, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(WeightResidency, ModelLoadFollowsKvslimMmapAndLogitsAgree) {
  const std::string path = make_model(TinyModel{.type = DType::F16});
  std::vector<float> logits[2];
  for (const Residency want : {Residency::Mapped, Residency::InMemory}) {
    const ScopedEnv env("KVSLIM_MMAP", want == Residency::Mapped ? "1" : "0");
    const auto model = Model::load(path);
    EXPECT_EQ(model->file().residency(), want);
    const auto tokens = testing::test_tokens(12, model->config().n_vocab);
    logits[want == Residency::InMemory] = testing::engine_logits(*model, tokens, 4, 1);
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(WeightResidency, ModelLoadRefusesABadKvslimMmap) {
  const ScopedEnv env("KVSLIM_MMAP", "maybe");
  try {
    Model::load(make_model(TinyModel{}));
    FAIL() << "loaded with KVSLIM_MMAP=maybe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KVSLIM_MMAP"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvslim
