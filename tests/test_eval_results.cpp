// samples.jsonl and the summary: records round-trip, malformed lines are reported by number,
// interrupted writes are repaired, duplicates drop; summary means against hand-computed values,
// independent of record order; CSV and Markdown layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "eval/results.h"
#include "eval/summary.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

using eval::SampleRecord;

SampleRecord record(const std::string& method, int64_t budget, const std::string& task, uint64_t seed, double score,
                    uint64_t kv_bytes, double ms = 1) {
  SampleRecord r;
  r.method = method;
  r.budget = budget;
  r.task = task;
  r.length = 256;
  r.seed = seed;
  r.protocol = "query-aware";
  r.score = score;
  r.partial = score;
  r.kv_bytes = kv_bytes;
  r.kv_bytes_peak = kv_bytes * 2;
  r.prefill_ms = ms;
  r.score_ms = ms / 2;
  r.decode_ms = ms * 3;
  r.output = "out " + std::to_string(seed);
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(EvalResults, RecordRoundTripsThroughJson) {
  SampleRecord r = record("snapkv:window=16,kernel=5", 64, "niah_single_1@0.25", 7, 0.5, 4096);
  r.depth = 0.25;
  r.recall = 0.75;
  r.kl = 0.125;
  r.output = "caf\xc3\xa9 \"quoted\"\n";
  const SampleRecord back = eval::record_from_json(nlohmann::json::parse(eval::to_json(r).dump()));
  EXPECT_EQ(eval::to_json(back), eval::to_json(r));
  EXPECT_EQ(back.key(), r.key());
  EXPECT_EQ(back.recall, 0.75);
  EXPECT_FALSE(back.attn_error.has_value());
  EXPECT_FALSE(eval::to_json(r).contains("attn_error"));
}

TEST(EvalResults, KeyTellsRunsApartByEveryKeyField) {
  const SampleRecord base = record("snapkv", 64, "vt", 1, 0, 0);
  std::vector<SampleRecord> variants(7, base);
  variants[0].method = "h2o";
  variants[1].budget = 128;
  variants[2].task = "cwe";
  variants[3].length = 512;
  variants[4].depth = 0.5;
  variants[5].seed = 2;
  variants[6].protocol = "query-agnostic";
  for (const auto& v : variants) EXPECT_NE(v.key(), base.key());
  SampleRecord same = base;
  same.score = 1;  // not part of the key
  same.output = "other";
  EXPECT_EQ(same.key(), base.key());
}

TEST(EvalResults, WriterAppendsAndReaderReadsBack) {
  const std::string dir = fresh_dir("results-append");
  const std::string path = dir + "/samples.jsonl";
  {
    eval::RecordWriter w(path);  // creates the directory
    w.append(record("full", 0, "vt", 1, 1, 100));
  }
  {
    eval::RecordWriter w(path);
    w.append(record("knorm", 8, "vt", 1, 0, 50));
  }
  const auto back = eval::read_records(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].method, "full");
  EXPECT_EQ(back[1].method, "knorm");
  EXPECT_TRUE(eval::read_records(dir + "/absent.jsonl").empty());
}

TEST(EvalResults, AnInterruptedLastLineIsDroppedAndCutBeforeAppending) {
  const std::string dir = fresh_dir("results-interrupted");
  const std::string path = dir + "/samples.jsonl";
  {
    eval::RecordWriter w(path);
    w.append(record("full", 0, "vt", 1, 1, 100));
  }
  { std::ofstream(path, std::ios::app) << R"({"method": "kno)"; }
  EXPECT_EQ(eval::read_records(path).size(), 1u);
  {
    eval::RecordWriter w(path);
    w.append(record("knorm", 8, "vt", 2, 0, 50));
  }
  const auto back = eval::read_records(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].seed, 2u);
}

TEST(EvalResults, MalformedLineIsReportedWithItsNumber) {
  const std::string dir = fresh_dir("results-malformed");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/samples.jsonl";
  std::ofstream(path) << eval::to_json(record("full", 0, "vt", 1, 1, 100)).dump() << "\n"
                      << "{not json}\n";
  try {
    eval::read_records(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  std::ofstream(path) << R"({"method": "full"})"
                      << "\n";
  try {
    eval::read_records(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
}

TEST(EvalResults, UnwritableDirectoryIsAClearError) {
  const std::string file = testing::temp_path("results-a-file");
  std::ofstream(file) << "x";
  try {
    eval::RecordWriter w(file + "/out/samples.jsonl");  // a directory below a regular file
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the output directory"), std::string::npos) << e.what();
  }
}

TEST(EvalResults, DuplicatesDropKeepingTheFirst) {
  const auto a = record("full", 0, "vt", 1, 1, 100), b = record("full", 0, "vt", 2, 0, 100);
  SampleRecord a_again = a;
  a_again.score = 0;
  const auto unique = eval::without_duplicates({a, b, a_again});
  ASSERT_EQ(unique.size(), 2u);
  EXPECT_EQ(unique[0].score, 1);
}

TEST(EvalSummary, MeansPerMethodBudgetTaskLength) {
  std::vector<SampleRecord> records = {
      record("knorm", 8, "vt", 1, 1.0, 100, 2),    record("knorm", 8, "vt", 2, 0.0, 300, 4),
      record("knorm", 16, "vt", 1, 0.5, 400, 1),   record("full", 0, "vt", 1, 1.0, 1000, 10),
      record("full", 0, "cwe", 1, 0.25, 1000, 10),
  };
  records[0].recall = 0.5;
  records[1].recall = 1.0;
  const eval::Summary s = eval::summarize(records);
  ASSERT_EQ(s.rows.size(), 4u);
  // Ordered by task, length, then `full` before other methods, then budget.
  EXPECT_EQ(s.rows[0].task, "cwe");
  EXPECT_EQ(s.rows[1].method, "full");
  EXPECT_EQ(s.rows[2].budget, 8);
  EXPECT_EQ(s.rows[3].budget, 16);
  const eval::SummaryRow& r = s.rows[2];
  EXPECT_EQ(r.samples, 2);
  EXPECT_DOUBLE_EQ(r.score, 0.5);
  EXPECT_DOUBLE_EQ(r.kv_bytes, 200);
  EXPECT_DOUBLE_EQ(r.prefill_ms, 3);
  EXPECT_DOUBLE_EQ(r.score_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.decode_ms, 9);
  EXPECT_DOUBLE_EQ(*r.recall, 0.75);
  EXPECT_TRUE(s.has_recall);
  EXPECT_FALSE(s.has_kl);
  EXPECT_FALSE(s.rows[3].recall.has_value());
}

TEST(EvalSummary, CsvHasTheRequiredColumnsThenTheAskedMetrics) {
  std::vector<SampleRecord> records = {record("full", 0, "vt", 1, 1.0, 1000, 10),
                                       record("snapkv:window=4,kernel=3", 8, "vt", 1, 0.5, 100, 2)};
  EXPECT_EQ(eval::summary_csv(eval::summarize(records)),
            "method,budget,task,length,samples,score,kv_bytes,prefill_ms,score_ms,decode_ms\n"
            "full,0,vt,256,1,1.0000,1000,10.00,5.00,30.00\n"
            "\"snapkv:window=4,kernel=3\",8,vt,256,1,0.5000,100,2.00,1.00,6.00\n");
  records[1].kl = 0.25;
  records[1].ppl_ratio = 1.5;
  const std::string csv = eval::summary_csv(eval::summarize(records));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "method,budget,task,length,samples,score,kv_bytes,prefill_ms,score_ms,decode_ms,kl,ppl_ratio");
  EXPECT_NE(csv.find(",6.00,0.25,1.5\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("full,0,vt,256,1,1.0000,1000,10.00,5.00,30.00,,\n"), std::string::npos) << csv;
}

TEST(EvalSummary, MarkdownIsTheSameTable) {
  const std::string md = eval::summary_markdown(eval::summarize({record("a|b", 8, "vt", 1, 1.0, 1000, 10)}));
  EXPECT_EQ(md,
            "| method | budget | task | length | samples | score | kv_bytes | prefill_ms | score_ms | decode_ms |\n"
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
            "| a\\|b | 8 | vt | 256 | 1 | 1.0000 | 1000 | 10.00 | 5.00 | 30.00 |\n");
}

TEST(EvalSummary, RecordOrderDoesNotChangeTheSummary) {
  std::vector<SampleRecord> records;
  for (uint64_t seed = 0; seed < 12; ++seed)
    records.push_back(record(seed % 2 ? "knorm" : "tova", 8, seed % 3 ? "vt" : "cwe", seed, 0.1 * double(seed),
                             10 + seed, 0.3 + 0.7 * double(seed)));
  const std::string expected = eval::summary_csv(eval::summarize(records));
  std::mt19937 rng(3);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(records.begin(), records.end(), rng);
    EXPECT_EQ(eval::summary_csv(eval::summarize(records)), expected);
  }
}

TEST(EvalSummary, MixedProtocolsAreRefused) {
  SampleRecord a = record("full", 0, "vt", 1, 1, 1), b = record("full", 0, "vt", 2, 1, 1);
  b.protocol = "query-agnostic";
  EXPECT_THROW(eval::summarize({a, b}), Error);
}

TEST(EvalSummary, WriteSummaryWritesBothFiles) {
  const std::string dir = fresh_dir("summary-files");
  std::filesystem::create_directories(dir);
  const eval::Summary s = eval::summarize({record("full", 0, "vt", 1, 1, 1)});
  eval::write_summary(s, dir);
  EXPECT_EQ(read_file(dir + "/summary.csv"), eval::summary_csv(s));
  EXPECT_EQ(read_file(dir + "/summary.md"), eval::summary_markdown(s));
}

}  // namespace
}  // namespace kvslim
