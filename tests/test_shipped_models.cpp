// The model files shipped in models/: each loads, fits the 25 MB bound, and its tokenizer gives
// back any text it encodes; each LookaheadKV adapter loads against the model beside it (its
// fingerprint matches); and the default model does what it is the default for: a context of at
// least 4096 tokens in which it finds a needle (niah_single_1) at 4096 tokens with the full cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "model/fingerprint.h"
#include "model/lookahead_adapter.h"
#include "model/model.h"

namespace kvslim::testing {
namespace {

const std::string kModels = std::string(KVSLIM_SOURCE_DIR) + "/models/";
const std::string kDefaultModel = kModels + "kvslim-4k.gguf";

// Every model file in models/ (adapters excluded).
std::vector<std::string> shipped_models() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".gguf") && !name.ends_with(".lookahead.gguf")) files.push_back(entry.path().string());
  }
  return files;
}

TEST(ShippedModels, LoadFitTheSizeBoundAndRoundTripText) {
  const std::vector<std::string> files = shipped_models();
  ASSERT_GE(files.size(), 3u);  // the default, the small test model, the K-quant check model
  // Digits (never merged), punctuation, newlines, a tab, non-ASCII bytes, a long number.
  const std::string text =
      "The special magic number for quiet-harbor is: 4817302.\n\tWhat is it?  Answer: \xc3\xa9t\xc3\xa9 "
      "VAR X1 = 12345 ... 98765432109876543210";
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    EXPECT_LE(std::filesystem::file_size(file), 25u * 1000 * 1000);
    const auto model = Model::load(file);
    const Tokenizer& tok = model->tokenizer();
    const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_GT(ids.size(), 10u);
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(ShippedModels, AdaptersLoadAgainstTheirModels) {
  int adapters = 0;
  for (const std::string& file : shipped_models()) {
    std::filesystem::path adapter(file);
    adapter.replace_extension(".lookahead.gguf");
    if (!std::filesystem::exists(adapter)) continue;
    SCOPED_TRACE(adapter.string());
    const auto model = Model::load(file);
    const LookaheadAdapter a = LookaheadAdapter::load(adapter.string(), model->config(), model_fingerprint(*model));
    EXPECT_GT(a.n_lookahead, 0);
    ++adapters;
  }
  EXPECT_GE(adapters, 2);  // the default model's and the small model's
}

TEST(ShippedModels, DefaultModelFindsANeedleAt4096Tokens) {
  ASSERT_TRUE(std::filesystem::exists(kDefaultModel)) << kDefaultModel;
  EXPECT_GE(Model::load(kDefaultModel)->config().context_length, 4096);
  const std::string out = temp_path("shipped-4k");
  std::filesystem::remove_all(out);
  const CommandResult r = run("eval -m " + kDefaultModel + " --methods full --tasks niah_single_1 --lengths 4096 " +
                              "--samples 3 --threads 2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out + "/summary.csv");
  std::string header, row;
  std::getline(in, header);
  ASSERT_TRUE(std::getline(in, row)) << "no summary row";
  std::vector<std::string> fields;
  std::stringstream cells(row);
  for (std::string f; std::getline(cells, f, ',');) fields.push_back(f);
  ASSERT_GT(fields.size(), 5u) << row;
  EXPECT_EQ(fields[2], "niah_single_1");
  EXPECT_EQ(std::stod(fields[5]), 1.0) << row;  // held-out samples 0..2, greedy
}

}  // namespace
}  // namespace kvslim::testing
