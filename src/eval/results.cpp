#include "eval/results.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "util/error.h"

namespace kvslim::eval {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SampleRecord::key() const {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", method, budget, task, length, depth, seed, protocol);
}

json to_json(const SampleRecord& r) {
  json j = {{"method", r.method},
            {"budget", r.budget},
            {"task", r.task},
            {"length", r.length},
            {"depth", r.depth},
            {"seed", r.seed},
            {"protocol", r.protocol},
            {"score", r.score},
            {"partial", r.partial},
            {"n_prompt", r.n_prompt},
            {"kept_tokens", r.kept_tokens},
            {"kv_bytes", r.kv_bytes},
            {"kv_bytes_peak", r.kv_bytes_peak},
            {"prefill_ms", r.prefill_ms},
            {"score_ms", r.score_ms},
            {"decode_ms", r.decode_ms},
            {"decode_steps", r.decode_steps},
            {"output", r.output}};
  if (r.recall) j["recall"] = *r.recall;
  if (r.attn_error) j["attn_error"] = *r.attn_error;
  if (r.kl) j["kl"] = *r.kl;
  if (r.ppl_ratio) j["ppl_ratio"] = *r.ppl_ratio;
  if (r.storage_tokens) j["storage_tokens"] = *r.storage_tokens;
  if (r.traffic_tokens) j["traffic_tokens"] = *r.traffic_tokens;
  return j;
}

namespace {

template <class T>
T field(const json& j, const char* name) {
  if (!j.is_object()) fail("a result is not a JSON object");
  const auto it = j.find(name);
  if (it == j.end()) fail("a result has no field '{}'", name);
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail("a result's field '{}' has the wrong type ({})", name, it->type_name());
  }
}

std::optional<double> optional_field(const json& j, const char* name) {
  if (!j.contains(name)) return std::nullopt;
  return field<double>(j, name);
}

}  // namespace

SampleRecord record_from_json(const json& j) {
  SampleRecord r;
  r.method = field<std::string>(j, "method");
  r.budget = field<int64_t>(j, "budget");
  r.task = field<std::string>(j, "task");
  r.length = field<int64_t>(j, "length");
  r.depth = field<double>(j, "depth");
  r.seed = field<uint64_t>(j, "seed");
  r.protocol = field<std::string>(j, "protocol");
  r.score = field<double>(j, "score");
  r.partial = field<double>(j, "partial");
  r.recall = optional_field(j, "recall");
  r.attn_error = optional_field(j, "attn_error");
  r.kl = optional_field(j, "kl");
  r.ppl_ratio = optional_field(j, "ppl_ratio");
  r.storage_tokens = optional_field(j, "storage_tokens");  // absent in results made before they existed
  r.traffic_tokens = optional_field(j, "traffic_tokens");
  r.n_prompt = field<int64_t>(j, "n_prompt");
  r.kept_tokens = field<double>(j, "kept_tokens");
  r.kv_bytes = field<uint64_t>(j, "kv_bytes");
  r.kv_bytes_peak = field<uint64_t>(j, "kv_bytes_peak");
  r.prefill_ms = field<double>(j, "prefill_ms");
  r.score_ms = field<double>(j, "score_ms");
  r.decode_ms = field<double>(j, "decode_ms");
  r.decode_steps = field<int64_t>(j, "decode_steps");
  r.output = field<std::string>(j, "output");
  return r;
}

std::vector<SampleRecord> read_records(const std::string& path) {
  std::vector<SampleRecord> records;
  if (!fs::exists(path)) return records;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  size_t start = 0;
  for (int line_no = 1; start < text.size(); ++line_no) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // an unterminated last line: an interrupted write
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    json object;
    try {
      object = json::parse(line);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
      fail("{} line {}: not valid JSON ({})", path, line_no, e.what());
    }
    try {
      records.push_back(record_from_json(object));
    } catch (const Error& e) {
      fail("{} line {}: {}", path, line_no, e.what());
    }
  }
  return records;
}

RecordWriter::RecordWriter(const std::string& path) : path_(path) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec) fail("cannot create the output directory {}: {}", dir.string(), ec.message());
  if (fs::exists(path)) {
    // Cut an unterminated last line (a run interrupted while writing) so appends start clean.
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t last_newline = text.rfind('\n');
    const uintmax_t complete = last_newline == std::string::npos ? 0 : last_newline + 1;
    if (complete != text.size()) fs::resize_file(path, complete, ec);
    if (ec) fail("cannot repair {}: {}", path, ec.message());
  }
  file_ = std::fopen(path.c_str(), "ab");
  if (!file_) fail("cannot write {}: {}", path, std::strerror(errno));
}

RecordWriter::~RecordWriter() {
  if (file_) std::fclose(file_);
}

void RecordWriter::append(const SampleRecord& record) {
  // Output cut inside a multi-byte character is replaced rather than refused.
  const std::string line = to_json(record).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail("cannot write {}: {}", path_, std::strerror(errno));
}

std::vector<SampleRecord> without_duplicates(const std::vector<SampleRecord>& records) {
  std::vector<SampleRecord> unique;
  std::set<std::string> seen;
  for (const SampleRecord& r : records)
    if (seen.insert(r.key()).second) unique.push_back(r);
  return unique;
}

}  // namespace kvslim::eval
