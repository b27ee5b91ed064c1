// LongBench-format data (THUDM/LongBench): JSONL samples with their dataset's metric, the prompt
// we build for them, and their score.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace kvslim::eval {

struct LongBenchSample {
  std::string dataset;  // e.g. "hotpotqa"; names its metric
  std::string context;
  std::string input;                     // the question (may be empty, as in gov_report)
  std::vector<std::string> answers;      // ground truths; a sample scores its best match
  int64_t length = 0;                    // LongBench's length field (words of the context)
  std::vector<std::string> all_classes;  // the classes of classification datasets (trec)
  int64_t line = 0;                      // 1-based line of the JSONL file it came from
};

// Samples that loaded, and one "line N: what is wrong" message per line that did not.
struct LongBenchData {
  std::vector<LongBenchSample> samples;
  std::vector<std::string> errors;
};

// Reads JSONL with fields context, input, answers (non-empty array of strings), length
// (integer), dataset (a known name) and all_classes (array of strings or null; required for
// classification). Other fields are ignored, blank lines skipped. A bad line is reported and
// the rest still load.
LongBenchData read_longbench(std::istream& in);
LongBenchData read_longbench_file(const std::string& path);  // throws kvslim::Error if unreadable

enum class LongBenchMetric { QaF1, RougeL, Classification, Retrieval, Count, CodeSim };

struct LongBenchDataset {
  std::string name;
  LongBenchMetric metric;
  int max_new_tokens;    // LongBench's dataset2maxlen
  bool first_line_only;  // LongBench scores only the first line of the output (trec, triviaqa, samsum)
};

// LongBench's English datasets; throws kvslim::Error listing the known names for any other.
const LongBenchDataset& longbench_dataset(const std::string& name);
const std::vector<LongBenchDataset>& longbench_datasets();

// Our one generic template: context + "\n\n" + input + "\nAnswer:". `context` (the context and
// the blank line) is what a query-agnostic protocol compresses; `question` follows it.
struct LongBenchPrompt {
  std::string context;
  std::string question;
};
LongBenchPrompt longbench_prompt(const LongBenchSample& sample);

// The dataset's metric of the output against each answer, the best of them, in [0, 1].
double longbench_score(const LongBenchSample& sample, const std::string& output);

}  // namespace kvslim::eval
