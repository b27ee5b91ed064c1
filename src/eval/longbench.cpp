#include "eval/longbench.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "eval/text_metrics.h"
#include "util/error.h"

namespace kvslim::eval {
namespace {

using json = nlohmann::json;

// A line's problem, reported by the reader with the line number.
struct LineError {
  std::string what;
};

std::string string_field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) throw LineError{fmt::format("'{}' must be a string", name)};
  return it->get<std::string>();
}

// An array of strings; `allow_null` accepts null or a missing field as an empty list.
std::vector<std::string> strings_field(const json& object, const char* name, bool allow_null) {
  const auto it = object.find(name);
  if (allow_null && (it == object.end() || it->is_null())) return {};
  const bool strings = it != object.end() && it->is_array() &&
                       std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_string(); });
  if (!strings) throw LineError{fmt::format("'{}' must be an array of strings", name)};
  return it->get<std::vector<std::string>>();
}

LongBenchSample parse_sample(const std::string& line) {
  json object;
  try {
    object = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw LineError{fmt::format("not valid JSON ({})", e.what())};
  }
  if (!object.is_object()) throw LineError{"expected a JSON object"};
  LongBenchSample sample;
  sample.dataset = string_field(object, "dataset");
  try {
    longbench_dataset(sample.dataset);
  } catch (const Error& e) {
    throw LineError{e.what()};
  }
  sample.context = string_field(object, "context");
  sample.input = string_field(object, "input");
  sample.answers = strings_field(object, "answers", false);
  if (sample.answers.empty()) throw LineError{"'answers' is empty"};
  const auto length = object.find("length");
  if (length == object.end() || !length->is_number_integer() || length->get<int64_t>() < 0) {
    throw LineError{"'length' must be a non-negative integer"};
  }
  sample.length = length->get<int64_t>();
  sample.all_classes = strings_field(object, "all_classes", true);
  const LongBenchMetric metric = longbench_dataset(sample.dataset).metric;
  if (metric == LongBenchMetric::Classification && sample.all_classes.empty()) {
    throw LineError{fmt::format("'all_classes' is needed to score {}", sample.dataset)};
  }
  if (metric == LongBenchMetric::Retrieval) {
    static const std::regex paragraph("Paragraph \\d+");
    for (const std::string& answer : sample.answers) {
      if (!std::regex_search(answer, paragraph)) {
        throw LineError{fmt::format("answer '{}' names no paragraph (expected \"Paragraph N\")", answer)};
      }
    }
  }
  return sample;
}

}  // namespace

const std::vector<LongBenchDataset>& longbench_datasets() {
  using M = LongBenchMetric;
  // LongBench's dataset2metric and dataset2maxlen (English datasets; the Chinese ones need a
  // Chinese word segmenter).
  static const std::vector<LongBenchDataset> list = {
      {"narrativeqa", M::QaF1, 128, false},
      {"qasper", M::QaF1, 128, false},
      {"multifieldqa_en", M::QaF1, 64, false},
      {"hotpotqa", M::QaF1, 32, false},
      {"2wikimqa", M::QaF1, 32, false},
      {"musique", M::QaF1, 32, false},
      {"gov_report", M::RougeL, 512, false},
      {"qmsum", M::RougeL, 512, false},
      {"multi_news", M::RougeL, 512, false},
      {"samsum", M::RougeL, 128, true},
      {"trec", M::Classification, 64, true},
      {"triviaqa", M::QaF1, 32, true},
      {"passage_retrieval_en", M::Retrieval, 32, false},
      {"passage_count", M::Count, 32, false},
      {"lcc", M::CodeSim, 64, false},
      {"repobench-p", M::CodeSim, 64, false},
  };
  return list;
}

const LongBenchDataset& longbench_dataset(const std::string& name) {
  std::string names;
  for (const LongBenchDataset& dataset : longbench_datasets()) {
    if (dataset.name == name) return dataset;
    names += (names.empty() ? "" : ", ") + dataset.name;
  }
  fail("unknown LongBench dataset '{}' (known: {})", name, names);
}

LongBenchData read_longbench(std::istream& in) {
  LongBenchData data;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      LongBenchSample sample = parse_sample(line);
      sample.line = number;
      data.samples.push_back(std::move(sample));
    } catch (const LineError& e) {
      data.errors.push_back(fmt::format("line {}: {}", number, e.what));
    }
  }
  return data;
}

LongBenchData read_longbench_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open LongBench file '{}'", path);
  return read_longbench(in);
}

LongBenchPrompt longbench_prompt(const LongBenchSample& sample) {
  return {sample.context + "\n\n", sample.input + "\nAnswer:"};
}

double longbench_score(const LongBenchSample& sample, const std::string& output) {
  const LongBenchDataset& dataset = longbench_dataset(sample.dataset);
  std::string_view prediction = output;
  if (dataset.first_line_only) {
    prediction.remove_prefix(std::min(prediction.size(), prediction.find_first_not_of('\n')));
    prediction = prediction.substr(0, prediction.find('\n'));
  }
  double best = 0.0;
  for (const std::string& truth : sample.answers) {
    double score = 0.0;
    switch (dataset.metric) {
      case LongBenchMetric::QaF1: score = qa_f1_score(prediction, truth); break;
      case LongBenchMetric::RougeL: score = rouge_l_score(prediction, truth); break;
      case LongBenchMetric::Classification: score = classification_score(prediction, truth, sample.all_classes); break;
      case LongBenchMetric::Retrieval: score = retrieval_score(prediction, truth); break;
      case LongBenchMetric::Count: score = count_score(prediction, truth); break;
      case LongBenchMetric::CodeSim: score = code_sim_score(prediction, truth); break;
    }
    best = std::max(best, score);
  }
  return best;
}

}  // namespace kvslim::eval
