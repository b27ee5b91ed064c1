// GGUF reader and writer: round trips of every value type and of tensors, typed getters, writer
// errors, and the llama.cpp-written vocab files in ../shared.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "gguf/gguf.h"
#include "prerequisites.h"
#include "util/error.h"

namespace kvslim::gguf {
namespace {

namespace fs = std::filesystem;

// A scratch directory per test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            fmt::format("kvslim_gguf_{}_{}_{}", ::getpid(), test->test_suite_name(), test->name());
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Distinct, recognisable bytes for tensor contents.
std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

Value scalar(ValueType type) {
  Value value;
  value.type = type;
  return value;
}

std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no kvslim::Error thrown";
  return {};
}

::testing::AssertionResult Mentions(const std::string& message, std::string_view word) {
  if (message.find(word) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << message << "\" does not mention \"" << word << "\"";
}

// ---------------------------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryValueType) {
  ScratchDir dir;
  Writer writer;
  Value u8 = scalar(ValueType::UINT8);
  u8.u = 200;
  Value i8 = scalar(ValueType::INT8);
  i8.i = -100;
  Value u16 = scalar(ValueType::UINT16);
  u16.u = 60000;
  Value i16 = scalar(ValueType::INT16);
  i16.i = -30000;
  Value i64 = scalar(ValueType::INT64);
  i64.i = INT64_MIN;
  Value f64 = scalar(ValueType::FLOAT64);
  f64.f = 1e-300;
  Value nested = scalar(ValueType::ARRAY);
  nested.array_type = ValueType::ARRAY;
  nested.array = {Value::of_i32_array({1, -2}), Value::of_string_array({"x"}), Value::of_f32_array({})};
  Value bools = scalar(ValueType::ARRAY);
  bools.array_type = ValueType::BOOL;
  bools.array = {Value::of_bool(true), Value::of_bool(false)};

  writer.set("t.u8", u8);
  writer.set("t.i8", i8);
  writer.set("t.u16", u16);
  writer.set("t.i16", i16);
  writer.set("t.u32", Value::of_u32(4000000000u));
  writer.set("t.i32", Value::of_i32(-2000000000));
  writer.set("t.u64", Value::of_u64(UINT64_MAX));
  writer.set("t.i64", i64);
  writer.set("t.f32", Value::of_f32(0.25f));
  writer.set("t.f64", f64);
  writer.set("t.true", Value::of_bool(true));
  writer.set("t.false", Value::of_bool(false));
  writer.set("t.str", Value::of_string(std::string("h\xc3\xa9llo\0world", 12)));
  writer.set("t.empty_str", Value::of_string(""));
  writer.set("t.strs", Value::of_string_array({"a", "", "\xe2\x96\x81the"}));
  writer.set("t.ints", Value::of_i32_array({1, -1, INT32_MAX}));
  writer.set("t.floats", Value::of_f32_array({1.5f, -2.0f}));
  writer.set("t.nested", nested);
  writer.set("t.bools", bools);
  writer.write(dir.file("values.gguf"));

  const File file = File::open(dir.file("values.gguf"));
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  ASSERT_EQ(file.metadata().size(), 19u);
  EXPECT_EQ(file.metadata()[0].key, "t.u8");
  EXPECT_EQ(file.metadata()[18].key, "t.bools");
  EXPECT_TRUE(file.tensors().empty());

  EXPECT_EQ(file.find("t.u8")->type, ValueType::UINT8);
  EXPECT_EQ(file.get_uint("t.u8"), 200u);
  EXPECT_EQ(file.find("t.i8")->type, ValueType::INT8);
  EXPECT_EQ(file.get_int("t.i8"), -100);
  EXPECT_EQ(file.find("t.u16")->type, ValueType::UINT16);
  EXPECT_EQ(file.get_uint("t.u16"), 60000u);
  EXPECT_EQ(file.get_int("t.i16"), -30000);
  EXPECT_EQ(file.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(file.get_int("t.i32"), -2000000000);
  EXPECT_EQ(file.get_uint("t.u64"), UINT64_MAX);
  EXPECT_EQ(file.get_int("t.i64"), INT64_MIN);
  EXPECT_EQ(file.find("t.f32")->type, ValueType::FLOAT32);
  EXPECT_EQ(file.get_float("t.f32"), 0.25);
  EXPECT_EQ(file.find("t.f64")->type, ValueType::FLOAT64);
  EXPECT_EQ(file.get_float("t.f64"), 1e-300);
  EXPECT_TRUE(file.get_bool("t.true"));
  EXPECT_FALSE(file.get_bool("t.false"));
  EXPECT_EQ(file.get_string("t.str"), std::string("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(file.get_string("t.empty_str"), "");
  EXPECT_EQ(file.get_string_array("t.strs"), (std::vector<std::string>{"a", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(file.get_int_array("t.ints"), (std::vector<int64_t>{1, -1, INT32_MAX}));
  EXPECT_EQ(file.get_float_array("t.floats"), (std::vector<float>{1.5f, -2.0f}));

  const Value& read_nested = *file.find("t.nested");
  ASSERT_EQ(read_nested.type, ValueType::ARRAY);
  ASSERT_EQ(read_nested.array_type, ValueType::ARRAY);
  ASSERT_EQ(read_nested.array.size(), 3u);
  EXPECT_EQ(read_nested.array[0].array_type, ValueType::INT32);
  EXPECT_EQ(read_nested.array[0].array[1].i, -2);
  EXPECT_EQ(read_nested.array[1].array[0].s, "x");
  EXPECT_EQ(read_nested.array[2].array_type, ValueType::FLOAT32);
  EXPECT_TRUE(read_nested.array[2].array.empty());

  const Value& read_bools = *file.find("t.bools");
  ASSERT_EQ(read_bools.array.size(), 2u);
  EXPECT_EQ(read_bools.array[0].u, 1u);
  EXPECT_EQ(read_bools.array[1].u, 0u);
}

struct ExpectedTensor {
  std::string name;
  TensorType type;
  std::vector<uint64_t> dims;
  uint64_t n_elements;
  uint64_t n_bytes;
};

// f32/f16/q8_0/bf16 with sizes that force padding between tensors.
const std::vector<ExpectedTensor> kTensors = {
    {"tok_embd.weight", TensorType::F32, {3}, 3, 12},
    {"blk.0.attn_q.weight", TensorType::F16, {4, 3}, 12, 24},
    {"blk.0.ffn_up.weight", TensorType::Q8_0, {64, 2}, 128, 4 * 34},
    {"output_norm.weight", TensorType::BF16, {5, 1, 1, 2}, 10, 20},
};

void add_test_tensors(Writer& writer) {
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const ExpectedTensor& t = kTensors[i];
    writer.add_tensor(t.name, static_cast<uint32_t>(t.type), t.dims, pattern(t.n_bytes, static_cast<uint8_t>(i)));
  }
}

void expect_test_tensors(const File& file, uint64_t alignment) {
  ASSERT_EQ(file.tensors().size(), kTensors.size());
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const ExpectedTensor& want = kTensors[i];
    const TensorInfo* got = file.find_tensor(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got, &file.tensors()[i]) << "tensors keep their order";
    EXPECT_EQ(got->type, static_cast<uint32_t>(want.type));
    EXPECT_EQ(got->dims, want.dims);
    EXPECT_EQ(got->n_elements, want.n_elements);
    EXPECT_EQ(got->n_bytes, want.n_bytes);
    EXPECT_EQ(got->offset % alignment, 0u) << want.name;
    const uint8_t* data = file.tensor_data(*got);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % alignment, 0u) << want.name;
    const auto expected = pattern(want.n_bytes, static_cast<uint8_t>(i));
    EXPECT_EQ(std::memcmp(data, expected.data(), expected.size()), 0) << want.name;
  }
  EXPECT_EQ(file.find_tensor("missing"), nullptr);
}

TEST(GgufRoundTrip, TensorsWithKnownBytes) {
  ScratchDir dir;
  Writer writer;
  writer.set("general.architecture", Value::of_string("llama"));
  add_test_tensors(writer);
  writer.write(dir.file("tensors.gguf"));

  const File file = File::open(dir.file("tensors.gguf"));
  EXPECT_EQ(file.alignment(), 32u);
  expect_test_tensors(file, 32);
  // Each tensor starts where the previous one's padded data ends.
  EXPECT_EQ(file.tensors()[1].offset, 32u);
  EXPECT_EQ(file.tensors()[2].offset, 64u);
  EXPECT_EQ(file.tensors()[3].offset, 64u + 160u);
  EXPECT_EQ(file.file_size() % 32, 0u);
}

TEST(GgufRoundTrip, Alignment64Honoured) {
  ScratchDir dir;
  Writer writer;
  writer.set("general.alignment", Value::of_u32(64));
  add_test_tensors(writer);
  writer.write(dir.file("aligned.gguf"));

  const File file = File::open(dir.file("aligned.gguf"));
  EXPECT_EQ(file.alignment(), 64u);
  expect_test_tensors(file, 64);
  EXPECT_EQ(file.tensors()[1].offset, 64u);
  EXPECT_EQ(file.file_size() % 64, 0u);
}

TEST(GgufRoundTrip, FromBytesMatchesOpen) {
  ScratchDir dir;
  Writer writer;
  writer.set("general.name", Value::of_string("tiny"));
  add_test_tensors(writer);
  writer.write(dir.file("tiny.gguf"));

  const File file = File::from_bytes(read_bytes(dir.file("tiny.gguf")), "tiny-in-memory");
  EXPECT_EQ(file.path(), "tiny-in-memory");
  EXPECT_EQ(file.get_string("general.name"), "tiny");
  expect_test_tensors(file, 32);
}

TEST(GgufRoundTrip, Version2Accepted) {
  ScratchDir dir;
  Writer writer;
  writer.set("general.name", Value::of_string("v2"));
  writer.write(dir.file("v2.gguf"));
  auto bytes = read_bytes(dir.file("v2.gguf"));
  bytes[4] = 2;  // v2 and v3 share the layout for little-endian files
  const File file = File::from_bytes(bytes);
  EXPECT_EQ(file.version(), 2u);
  EXPECT_EQ(file.get_string("general.name"), "v2");
}

TEST(GgufRoundTrip, FileIsMovable) {
  ScratchDir dir;
  Writer writer;
  add_test_tensors(writer);
  writer.write(dir.file("move.gguf"));

  File first = File::open(dir.file("move.gguf"));
  const uint8_t* data = first.tensor_data(first.tensors()[0]);
  File second = std::move(first);
  EXPECT_EQ(second.tensor_data(second.tensors()[0]), data);
  File third = File::from_bytes(read_bytes(dir.file("move.gguf")));
  third = std::move(second);
  expect_test_tensors(third, 32);
}

TEST(GgufWriter, SetReplacesInPlace) {
  ScratchDir dir;
  Writer writer;
  writer.set("a", Value::of_u32(1));
  writer.set("b", Value::of_u32(2));
  writer.set("a", Value::of_string("replaced"));
  writer.write(dir.file("set.gguf"));
  const File file = File::open(dir.file("set.gguf"));
  ASSERT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata()[0].key, "a");
  EXPECT_EQ(file.get_string("a"), "replaced");
  EXPECT_EQ(file.metadata()[1].key, "b");
}

TEST(GgufWriter, RejectsInconsistentTensors) {
  Writer writer;
  EXPECT_TRUE(
      Mentions(error_message([&] { writer.add_tensor("x", 255, {4}, pattern(4, 0)); }), "unknown ggml type id 255"));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 0, {4}, pattern(15, 0)); }), "15 bytes"));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 0, {}, {}); }), "rank 0"));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 0, {1, 1, 1, 1, 1}, pattern(4, 0)); }), "rank 5"));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 0, {0}, {}); }), "at least 1"));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 8, {16}, pattern(17, 0)); }), "block size"));
  EXPECT_TRUE(
      Mentions(error_message([&] { writer.add_tensor(std::string(64, 'n'), 0, {1}, pattern(4, 0)); }), "1..63 bytes"));
  writer.add_tensor("x", 0, {1}, pattern(4, 0));
  EXPECT_TRUE(Mentions(error_message([&] { writer.add_tensor("x", 0, {1}, pattern(4, 0)); }), "added twice"));
}

TEST(GgufWriter, RejectsBadValuesAtWrite) {
  ScratchDir dir;
  Writer mixed;
  Value array = Value::of_i32_array({1});
  array.array.push_back(Value::of_string("not an i32"));
  mixed.set("mixed", array);
  EXPECT_TRUE(Mentions(error_message([&] { mixed.write(dir.file("mixed.gguf")); }), "array element #1"));

  Writer bad_alignment;
  bad_alignment.set("general.alignment", Value::of_u32(48));
  EXPECT_TRUE(Mentions(error_message([&] { bad_alignment.write(dir.file("align.gguf")); }), "general.alignment"));
  EXPECT_TRUE(Mentions(error_message([] { Writer().set("", Value::of_u32(1)); }), "metadata key"));
  EXPECT_FALSE(fs::exists(dir.file("mixed.gguf.tmp")));
  EXPECT_FALSE(fs::exists(dir.file("mixed.gguf")));
}

TEST(GgufWriter, UnwritablePathNamed) {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/model.gguf");
  const std::string message = error_message([&] { Writer().write(path); });
  EXPECT_TRUE(Mentions(message, path));
  EXPECT_TRUE(Mentions(message, "cannot open"));
}

TEST(GgufWriter, ReplacesExistingFileAtomically) {
  ScratchDir dir;
  Writer first;
  first.set("v", Value::of_u32(1));
  first.write(dir.file("m.gguf"));
  Writer second;
  second.set("v", Value::of_u32(2));
  second.write(dir.file("m.gguf"));
  EXPECT_EQ(File::open(dir.file("m.gguf")).get_uint("v"), 2u);
  EXPECT_FALSE(fs::exists(dir.file("m.gguf.tmp")));
}

// ---------------------------------------------------------------------------------------------

File getter_file() {
  ScratchDir dir;
  Writer writer;
  writer.set("s", Value::of_string("text"));
  writer.set("u32", Value::of_u32(7));
  writer.set("neg", Value::of_i32(-5));
  writer.set("big", Value::of_u64(UINT64_MAX));
  writer.set("f", Value::of_f32(1.5f));
  writer.set("b", Value::of_bool(true));
  writer.set("strs", Value::of_string_array({"a", "b"}));
  writer.set("ints", Value::of_i32_array({3, -4}));
  writer.set("floats", Value::of_f32_array({0.5f}));
  writer.write(dir.file("getters.gguf"));
  return File::open(dir.file("getters.gguf"));
}

TEST(GgufGetters, IntegerConversions) {
  const File file = getter_file();
  EXPECT_EQ(file.get_uint("u32"), 7u);
  EXPECT_EQ(file.get_int("u32"), 7);
  EXPECT_EQ(file.get_int("neg"), -5);
  EXPECT_TRUE(Mentions(error_message([&] { file.get_uint("neg"); }), "value -5 does not fit"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_int("big"); }), "does not fit"));
  EXPECT_EQ(file.get_int_array("ints"), (std::vector<int64_t>{3, -4}));
}

TEST(GgufGetters, WrongTypeNamesKeyAndTypes) {
  const File file = getter_file();
  std::string message = error_message([&] { file.get_string("u32"); });
  EXPECT_TRUE(Mentions(message, "\"u32\""));
  EXPECT_TRUE(Mentions(message, "has type u32, expected string"));
  EXPECT_TRUE(Mentions(message, "getters.gguf"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_uint("s"); }), "\"s\" has type string, expected an integer"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_float("u32"); }), "expected f32 or f64"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_bool("s"); }), "expected bool"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_string_array("ints"); }),
                       "\"ints\" has type array of i32, expected array of string"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_float_array("strs"); }), "array of string"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_int_array("floats"); }), "expected array of integers"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_string_opt("u32"); }), "\"u32\""));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_bool_opt("f"); }), "\"f\""));
}

TEST(GgufGetters, MissingKeyNamed) {
  const File file = getter_file();
  EXPECT_TRUE(Mentions(error_message([&] { file.get_string("llama.block_count"); }),
                       "metadata key \"llama.block_count\" is missing"));
  EXPECT_TRUE(Mentions(error_message([&] { file.get_int_array("nope"); }), "\"nope\""));
  EXPECT_EQ(file.find("nope"), nullptr);
  EXPECT_EQ(file.get_string_opt("nope"), std::nullopt);
  EXPECT_EQ(file.get_uint_opt("nope"), std::nullopt);
  EXPECT_EQ(file.get_float_opt("nope"), std::nullopt);
  EXPECT_EQ(file.get_bool_opt("nope"), std::nullopt);
  EXPECT_EQ(file.get_string_opt("s"), "text");
  EXPECT_EQ(file.get_uint_opt("u32"), 7u);
  EXPECT_EQ(file.get_float_opt("f"), 1.5);
  EXPECT_EQ(file.get_bool_opt("b"), true);
  EXPECT_EQ(file.get_string_array("strs"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(file.get_float_array("floats"), (std::vector<float>{0.5f}));
}

TEST(GgufTensorTypes, SizesAndNames) {
  EXPECT_EQ(tensor_bytes(0, 10), 40u);         // f32
  EXPECT_EQ(tensor_bytes(1, 10), 20u);         // f16
  EXPECT_EQ(tensor_bytes(2, 64), 2u * 18);     // q4_0
  EXPECT_EQ(tensor_bytes(8, 64), 2u * 34);     // q8_0
  EXPECT_EQ(tensor_bytes(12, 512), 2u * 144);  // q4_k
  EXPECT_EQ(tensor_bytes(14, 256), 210u);      // q6_k
  EXPECT_EQ(tensor_bytes(30, 3), 6u);          // bf16
  EXPECT_EQ(tensor_bytes(28, 3), 24u);         // f64
  EXPECT_EQ(tensor_bytes(39, 32), 17u);        // mxfp4
  EXPECT_STREQ(tensor_type_name(12), "q4_k");
  EXPECT_STREQ(tensor_type_name(30), "bf16");
  EXPECT_STREQ(tensor_type_name(255), "unknown(255)");
  EXPECT_THROW(tensor_bytes(4, 32), Error);  // retired q4_2
  EXPECT_THROW(tensor_bytes(255, 1), Error);
  EXPECT_THROW(tensor_bytes(8, 33), Error);                  // not whole q8_0 blocks
  EXPECT_THROW(tensor_bytes(28, uint64_t{1} << 62), Error);  // 2^65 bytes
}

// ---------------------------------------------------------------------------------------------

const fs::path kVocabDir = testing::shared_dir() / "tokenizer-vectors";

std::vector<fs::path> vocab_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kVocabDir)) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(GgufVocabFiles, ParseLlamaCppFiles) {
  KVSLIM_REQUIRE(fs::is_directory(kVocabDir), kVocabDir << " not found");
  const auto files = vocab_files();
  ASSERT_FALSE(files.empty());
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    const File file = File::open(path.string());
    EXPECT_TRUE(file.version() == 2 || file.version() == 3);
    const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
    EXPECT_GT(tokens.size(), 1000u);
    if (const Value* types = file.find("tokenizer.ggml.token_type")) {
      EXPECT_EQ(types->array.size(), tokens.size());
    }
    if (const Value* scores = file.find("tokenizer.ggml.scores")) {
      EXPECT_EQ(scores->array.size(), tokens.size());
    }
    EXPECT_FALSE(file.get_string("tokenizer.ggml.model").empty());
    // The counts in the header agree with what was parsed.
    const auto bytes = read_bytes(path.string());
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    std::memcpy(&tensor_count, bytes.data() + 8, 8);
    std::memcpy(&kv_count, bytes.data() + 16, 8);
    EXPECT_EQ(file.tensors().size(), tensor_count);
    EXPECT_EQ(file.metadata().size(), kv_count);
    for (const TensorInfo& tensor : file.tensors()) {
      EXPECT_EQ(tensor.n_bytes, tensor_bytes(tensor.type, tensor.n_elements));
      EXPECT_LE(tensor.offset + tensor.n_bytes, file.file_size());
    }
  }
}

// The writer's layout is llama.cpp's: rewriting a file reproduces it, up to the zero padding
// our writer always ends the header with.
TEST(GgufVocabFiles, RewriteReproducesBytes) {
  KVSLIM_REQUIRE(fs::is_directory(kVocabDir), kVocabDir << " not found");
  ScratchDir dir;
  for (const fs::path& path : vocab_files()) {
    SCOPED_TRACE(path.string());
    const File file = File::open(path.string());
    Writer writer;
    for (const MetadataEntry& entry : file.metadata()) writer.set(entry.key, entry.value);
    for (const TensorInfo& tensor : file.tensors()) {
      const uint8_t* data = file.tensor_data(tensor);
      writer.add_tensor(tensor.name, tensor.type, tensor.dims, std::vector<uint8_t>(data, data + tensor.n_bytes));
    }
    writer.write(dir.file("rewrite.gguf"));
    const auto original = read_bytes(path.string());
    const auto rewritten = read_bytes(dir.file("rewrite.gguf"));
    ASSERT_GE(rewritten.size(), original.size());
    EXPECT_LT(rewritten.size() - original.size(), file.alignment());
    EXPECT_TRUE(std::equal(original.begin(), original.end(), rewritten.begin()));
    EXPECT_TRUE(std::all_of(rewritten.begin() + static_cast<ptrdiff_t>(original.size()), rewritten.end(),
                            [](uint8_t b) { return b == 0; }));
  }
}

}  // namespace
}  // namespace kvslim::gguf
