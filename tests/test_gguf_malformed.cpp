// The malformed-file corpus: every case starts from a valid small file made with the Writer,
// breaks one field, and must be rejected with a kvslim::Error naming the field — never a crash
// or a huge allocation. Runs under ASan+UBSan in CI, so every case stays small.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "util/error.h"

namespace kvslim::gguf {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kAlignment = 32;

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Value array_of_arrays(std::vector<Value> items) {
  Value value;
  value.type = ValueType::ARRAY;
  value.array_type = ValueType::ARRAY;
  value.array = std::move(items);
  return value;
}

// The valid file every case starts from, with where its data section starts and ends.
struct BaseFile {
  Bytes bytes;
  uint64_t data_start = 0;  // first byte of the data section
  uint64_t data_end = 0;    // last byte of the last tensor's data, plus one
};

Bytes write_to_bytes(const Writer& writer) {
  const std::string path =
      (fs::temp_directory_path() / fmt::format("kvslim_gguf_malformed_{}.gguf", ::getpid())).string();
  writer.write(path);
  Bytes bytes = read_bytes(path);
  fs::remove(path);
  return bytes;
}

const BaseFile& base() {
  static const BaseFile file = [] {
    Writer writer;
    writer.set("general.architecture", Value::of_string("llama"));
    writer.set("general.alignment", Value::of_u32(kAlignment));
    writer.set("test.str", Value::of_string("hello"));
    writer.set("test.ints", Value::of_i32_array({1, 2, 3}));
    writer.set("test.nested", array_of_arrays({Value::of_i32_array({4}), Value::of_i32_array({5, 6})}));
    writer.set("test.flag", Value::of_bool(true));
    writer.set("dup.aa", Value::of_u32(1));
    writer.set("dup.bb", Value::of_u32(2));
    writer.add_tensor("w.a", static_cast<uint32_t>(TensorType::F32), {8}, Bytes(32, 1));
    writer.add_tensor("w.b", static_cast<uint32_t>(TensorType::Q8_0), {32, 2}, Bytes(68, 2));
    writer.add_tensor("w.c", static_cast<uint32_t>(TensorType::F16), {4, 4}, Bytes(32, 3));

    BaseFile base;
    base.bytes = write_to_bytes(writer);
    // The writer pads the last tensor too, so the data section is the aligned tail of the file.
    const File parsed = File::from_bytes(base.bytes);
    const TensorInfo& last = parsed.tensors().back();
    const uint64_t padded_last = (last.n_bytes + kAlignment - 1) / kAlignment * kAlignment;
    base.data_start = base.bytes.size() - last.offset - padded_last;
    base.data_end = base.data_start + last.offset + last.n_bytes;
    return base;
  }();
  return file;
}

// Offset just past the first length-prefixed occurrence of `text` (a key or tensor name).
size_t after_string(std::string_view text) {
  const Bytes& bytes = base().bytes;
  Bytes needle(8);
  const uint64_t length = text.size();
  std::memcpy(needle.data(), &length, 8);
  needle.insert(needle.end(), text.begin(), text.end());
  const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << text;
  return static_cast<size_t>(it - bytes.begin()) + needle.size();
}

// Where the fields of a tensor info sit, found from its name.
struct TensorFields {
  size_t rank;
  size_t dims;
  size_t type;
  size_t offset;
};
TensorFields tensor_fields(std::string_view name, uint32_t rank) {
  const size_t after = after_string(name);
  return {after, after + 4, after + 4 + 8 * rank, after + 4 + 8 * rank + 4};
}

template <class T>
Bytes patched(size_t offset, T value) {
  Bytes bytes = base().bytes;
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
  return bytes;
}

Bytes patched_text(size_t offset, std::string_view text) {
  Bytes bytes = base().bytes;
  std::memcpy(bytes.data() + offset, text.data(), text.size());
  return bytes;
}

// The message of the kvslim::Error that parsing `bytes` must throw.
std::string rejection(const Bytes& bytes) {
  std::string message;
  EXPECT_THROW(
      {
        try {
          File::from_bytes(bytes, "bad.gguf");
        } catch (const Error& error) {
          message = error.what();
          throw;
        }
      },
      Error);
  return message;
}

::testing::AssertionResult Mentions(const std::string& message, std::string_view word) {
  if (message.find(word) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << message << "\" does not mention \"" << word << "\"";
}

// ---------------------------------------------------------------------------------------------

TEST(GgufMalformed, BaseFileIsValid) {
  const File file = File::from_bytes(base().bytes, "base.gguf");
  EXPECT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.metadata().size(), 8u);
  EXPECT_EQ(base().data_start % kAlignment, 0u);
  EXPECT_LT(base().data_start, base().data_end);
}

TEST(GgufMalformed, TruncatedAtEveryHeaderOffset) {
  const Bytes& full = base().bytes;
  for (size_t size = 0; size < base().data_start; ++size) {
    SCOPED_TRACE(size);
    const std::string message = rejection(Bytes(full.begin(), full.begin() + static_cast<ptrdiff_t>(size)));
    EXPECT_TRUE(Mentions(message, "bad.gguf"));
  }
}

TEST(GgufMalformed, TruncatedInsideTensorData) {
  const Bytes& full = base().bytes;
  for (size_t size = base().data_start; size < base().data_end; size += 5) {
    SCOPED_TRACE(size);
    const std::string message = rejection(Bytes(full.begin(), full.begin() + static_cast<ptrdiff_t>(size)));
    EXPECT_TRUE(Mentions(message, "extends past end of file"));
  }
}

TEST(GgufMalformed, HugeCounts) {
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(8, uint64_t{1} << 62)), "tensor count"));
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(8, UINT64_MAX)), "tensor count"));
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(16, uint64_t{1} << 62)), "key-value count"));
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(16, UINT64_MAX)), "key-value count"));
  // The first key's length, then a string value's length.
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(24, uint64_t{1} << 63)), "string length"));
  const std::string message = rejection(patched<uint64_t>(after_string("test.str") + 4, uint64_t{1} << 63));
  EXPECT_TRUE(Mentions(message, "\"test.str\") value: string length 9223372036854775808"));
  // An array's length sits after its value type and element type.
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(after_string("test.ints") + 8, uint64_t{1} << 61)),
                       "\"test.ints\") array length"));
  // The first inner array of test.nested: outer type, element type, length, inner element type.
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(after_string("test.nested") + 20, uint64_t{1} << 61)),
                       "element #0 array length"));
  // A tensor name's length.
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(after_string("w.a") - 11, uint64_t{1} << 63)), "tensor #0 name"));
}

TEST(GgufMalformed, BadValueTypes) {
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(after_string("test.str"), 99)), "unknown value type 99"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(after_string("test.ints") + 4, 99)),
                       "array element type: unknown value type 99"));
  EXPECT_TRUE(Mentions(rejection(patched<uint8_t>(after_string("test.flag") + 4, 2)), "neither 0 nor 1"));
}

TEST(GgufMalformed, BadTensorType) {
  const TensorFields w_a = tensor_fields("w.a", 1);
  EXPECT_TRUE(
      Mentions(rejection(patched<uint32_t>(w_a.type, 255)), "tensor #0 \"w.a\" type: unknown ggml type id 255"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(w_a.type, 4)), "unknown ggml type id 4"));    // retired
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(w_a.type, 31)), "unknown ggml type id 31"));  // repacked
}

TEST(GgufMalformed, BadRank) {
  const TensorFields w_b = tensor_fields("w.b", 2);
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(w_b.rank, 0)), "rank 0 is outside 1..4"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(w_b.rank, 9)), "rank 9 is outside 1..4"));
}

TEST(GgufMalformed, BadDimensions) {
  const TensorFields w_c = tensor_fields("w.c", 2);
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(w_c.dims, 0)), "\"w.c\" dimension 0: is 0"));
  Bytes overflow = patched<uint64_t>(w_c.dims, uint64_t{1} << 40);
  std::memcpy(overflow.data() + w_c.dims + 8, &overflow[w_c.dims], 8);
  EXPECT_TRUE(Mentions(rejection(overflow), "dimension 1: 1099511627776 makes the element count overflow"));
  const TensorFields w_b = tensor_fields("w.b", 2);
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(w_b.dims, 33)), "not a multiple of the q8_0 block size 32"));
}

TEST(GgufMalformed, BadTensorOffsets) {
  const TensorFields w_b = tensor_fields("w.b", 2);
  EXPECT_TRUE(
      Mentions(rejection(patched<uint64_t>(w_b.offset, 40)), "offset: 40 is not a multiple of the alignment 32"));
  std::string message = rejection(patched<uint64_t>(w_b.offset, uint64_t{1} << 40));
  EXPECT_TRUE(Mentions(message, "tensor #1 \"w.b\": data [offset 1099511627776, 68 bytes] extends past end of file"));
  EXPECT_TRUE(Mentions(message, fmt::format("at byte {}", w_b.offset)));
  // Aligned and so large that offset + size would wrap around.
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(w_b.offset, UINT64_MAX - 31)), "extends past end of file"));
}

TEST(GgufMalformed, BadAlignment) {
  const size_t type_at = after_string("general.alignment");
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(type_at + 4, 0)), "alignment 0 is not a non-zero power of two"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(type_at + 4, 3)), "alignment 3 is not a non-zero power of two"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(type_at, static_cast<uint32_t>(ValueType::INT32))),
                       "alignment must be u32, found i32"));
}

TEST(GgufMalformed, BadMagicAndVersion) {
  EXPECT_TRUE(Mentions(rejection(patched_text(0, "GGML")), "magic"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(4, 1)), "unsupported GGUF version 1"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(4, 99)), "unsupported GGUF version 99"));
  EXPECT_TRUE(Mentions(rejection(patched<uint32_t>(4, 0x03000000)), "big-endian"));
}

TEST(GgufMalformed, Duplicates) {
  EXPECT_TRUE(Mentions(rejection(patched_text(after_string("dup.bb") - 6, "dup.aa")), "\"dup.aa\"): duplicate key"));
  EXPECT_TRUE(
      Mentions(rejection(patched_text(after_string("w.b") - 3, "w.a")), "tensor #1 \"w.a\": duplicate tensor name"));
}

TEST(GgufMalformed, NameLimits) {
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(24, 0)), "metadata key #0 name: empty key"));
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(24, 70000)), "exceeds the limit of 65535"));
  EXPECT_TRUE(Mentions(rejection(patched<uint64_t>(after_string("w.a") - 11, 65)), "exceeds the limit of 64"));
}

TEST(GgufMalformed, NestingDepthBounded) {
  auto nested = [](int depth) {
    Value value = Value::of_i32_array({7});
    for (int level = 1; level < depth; ++level) value = array_of_arrays({value});
    Writer writer;
    writer.set("deep", value);
    return write_to_bytes(writer);
  };
  const File file = File::from_bytes(nested(8));
  EXPECT_EQ(file.find("deep")->array_type, ValueType::ARRAY);
  EXPECT_TRUE(Mentions(rejection(nested(9)), "nested more than 8 deep"));
}

// Random-ish corruption of every header byte: parsing may succeed or throw kvslim::Error,
// nothing else.
TEST(GgufMalformed, ByteFlipsNeverCrash) {
  for (size_t offset = 0; offset < base().data_start; ++offset) {
    const uint8_t original = base().bytes[offset];
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0xff}, uint8_t(original ^ 0x01), uint8_t(original ^ 0x80)}) {
      try {
        File::from_bytes(patched<uint8_t>(offset, value));
      } catch (const Error&) {
      } catch (const std::exception& other) {
        ADD_FAILURE() << "byte " << offset << " = " << int(value) << ": " << other.what();
      }
    }
  }
}

TEST(GgufMalformed, OpenErrorsNameThePath) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvslim_gguf_open_{}", ::getpid());
  fs::create_directories(dir);
  const std::string missing = (dir / "missing.gguf").string();
  const std::string empty = (dir / "empty.gguf").string();
  const std::string truncated = (dir / "truncated.gguf").string();
  write_bytes(empty, {});
  write_bytes(truncated, Bytes(base().bytes.begin(), base().bytes.begin() + 100));

  auto open_error = [](const std::string& path) {
    std::string message;
    EXPECT_THROW(
        {
          try {
            File::open(path);
          } catch (const Error& error) {
            message = error.what();
            throw;
          }
        },
        Error);
    return message;
  };
  EXPECT_TRUE(Mentions(open_error(missing), missing + ": cannot open"));
  EXPECT_TRUE(Mentions(open_error(dir.string()), "not a regular file"));
  EXPECT_TRUE(Mentions(open_error(empty), empty + ": empty file"));
  EXPECT_TRUE(Mentions(open_error(truncated), truncated + ": "));
  EXPECT_TRUE(Mentions(rejection({}), "empty buffer"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvslim::gguf
