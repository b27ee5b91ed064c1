// A trained model quantized to q8_0 / q6_k / q5_k_m / q4_k_m keeps its full-cache task scores
// within 0.05 of the unquantized file on held-out samples. The default model's 128-wide rows
// cannot hold 256-value K-quant super-blocks (they fall back to q5_0/q8_0), so this runs on
// models/kvslim-d256.gguf, a model trained for it with every row a multiple of 256 (dim 256,
// ffn 768): each block tensor really gets the preset's K-quant type.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cli_helpers.h"

namespace kvslim::testing {
namespace {

const std::string kModel = std::string(KVSLIM_SOURCE_DIR) + "/models/kvslim-d256.gguf";
const std::string kTasks = "niah_single_1,niah_single_2,passkey";

// task -> mean score of the full cache, from `kvslim eval`'s summary.csv (score: column 6).
std::map<std::string, double> full_cache_scores(const std::string& model, const std::string& out) {
  std::filesystem::remove_all(out);
  const CommandResult r = run("eval -m " + model + " --methods full --tasks " + kTasks +
                              " --lengths 1024 --samples 20 --threads 2 --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out + "/summary.csv");
  std::string line;
  std::getline(in, line);  // header
  EXPECT_NE(line.find("method,budget,task,length,samples,score"), std::string::npos) << line;
  std::map<std::string, double> scores;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream row(line);
    for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
    if (fields.size() > 5 && fields[0] == "full") scores[fields[2]] = std::stod(fields[5]);
  }
  return scores;
}

TEST(QuantTaskScores, KQuantsKeepTheTrainedModelsScoresWithinFiveHundredths) {
  ASSERT_TRUE(std::filesystem::exists(kModel)) << kModel;
  const std::map<std::string, double> reference = full_cache_scores(kModel, temp_path("qts-f16"));
  ASSERT_EQ(reference.size(), 3u);
  // The comparison means something only if the model solves some of it and misses some.
  double mean = 0;
  for (const auto& [task, score] : reference) mean += score / 3;
  ASSERT_GT(mean, 0.3);
  ASSERT_LT(mean, 1.0);

  for (const std::string type : {"q8_0", "q6_k", "q5_k_m", "q4_k_m"}) {
    SCOPED_TRACE(type);
    const std::string file = temp_path("d256-" + type + ".gguf");
    const CommandResult q = run("quantize " + kModel + " " + file + " --type " + type);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_NE(q.err.find("(0 fallbacks)"), std::string::npos) << q.err;  // every row took the K-quant
    const std::map<std::string, double> scores = full_cache_scores(file, temp_path("qts-" + type));
    for (const auto& [task, score] : reference)
      EXPECT_LE(std::abs(scores.at(task) - score), 0.05 + 1e-9) << task << ": " << scores.at(task) << " vs " << score;
    std::filesystem::remove(file);
  }
}

}  // namespace
}  // namespace kvslim::testing
