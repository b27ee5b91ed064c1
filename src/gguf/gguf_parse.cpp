// Parses the GGUF header (magic, version, counts, metadata, tensor infos) from an in-memory
// image. Nothing is allocated or looped over on the strength of an untrusted count until the
// bytes it claims have been shown to exist.
#include "gguf/gguf_parse.h"

#include <array>
#include <bit>
#include <unordered_set>

#include "gguf/ggml_types.h"
#include "gguf/gguf_cursor.h"
#include "util/error.h"

namespace kvslim::gguf::detail {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields straight into host integers");

// The smallest possible encodings, which bound untrusted counts by the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key length, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, rank, 1 dim, type, offset

uint64_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;     // the length prefix
    case ValueType::ARRAY: return 4 + 8;  // element type and length
  }
  return 1;
}

std::string version_problem(uint32_t version) {
  if (version == 1) {
    return "unsupported GGUF version 1 (v1 used 32-bit counts; only versions 2 and 3 are supported)";
  }
  const uint32_t swapped = __builtin_bswap32(version);
  if (swapped == 2 || swapped == 3) {
    return fmt::format("unsupported GGUF version {}: the file looks big-endian, which is not supported", version);
  }
  return fmt::format("unsupported GGUF version {} (only versions 2 and 3 are supported)", version);
}

class Parser {
 public:
  Parser(const uint8_t* data, uint64_t size, std::string_view label) : cur_(data, size, label) {}

  Header run() {
    read_preamble();
    for (uint64_t i = 0; i < n_kv_; ++i) read_metadata_entry(i);
    // Checked again now that the metadata has used up its share of the file.
    cur_.check_count(n_tensors_, kMinTensorInfoBytes, Field{"header", "tensor count"}, 8);
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    check_tensor_data();
    return std::move(header_);
  }

 private:
  void read_preamble();
  void read_metadata_entry(uint64_t index);
  void apply_alignment(const Value& value, std::string_view owner, uint64_t type_at, uint64_t value_at);
  ValueType read_value_type(const Field& field);
  Value read_value(ValueType type, const Field& field, int depth);
  void read_array(Value& array, const Field& field, int depth);
  void read_tensor_info(uint64_t index);
  void check_tensor_data();

  Cursor cur_;
  Header header_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::unordered_set<std::string_view> keys_;          // views into the image
  std::unordered_set<std::string_view> tensor_names_;  // likewise
  std::vector<uint64_t> offset_at_;                    // where each tensor's offset was read, for later messages
};

void Parser::read_preamble() {
  const Field magic_field{"header", "magic"};
  const auto magic = cur_.read<std::array<char, 4>>(magic_field);
  const std::string_view magic_text(magic.data(), magic.size());
  if (magic_text != "GGUF") {
    cur_.fail(0, magic_field, fmt::format("\"{}\" is not \"GGUF\" (not a GGUF file)", printable(magic_text)));
  }

  const Field version_field{"header", "version"};
  header_.version = cur_.read<uint32_t>(version_field);
  if (header_.version != 2 && header_.version != 3) {
    cur_.fail(4, version_field, version_problem(header_.version));
  }

  const Field tensor_count{"header", "tensor count"};
  n_tensors_ = cur_.read<uint64_t>(tensor_count);
  cur_.check_count(n_tensors_, kMinTensorInfoBytes, tensor_count, 8);

  const Field kv_count{"header", "metadata key-value count"};
  n_kv_ = cur_.read<uint64_t>(kv_count);
  cur_.check_count(n_kv_, kMinKvBytes, kv_count, 16);
}

void Parser::read_metadata_entry(uint64_t index) {
  const std::string prefix = fmt::format("metadata key #{}", index);
  const Field key_field{prefix, "name"};
  const uint64_t key_at = cur_.pos();
  const std::string_view key = cur_.read_string(key_field, kMaxKeyLength);
  if (key.empty()) cur_.fail(key_at, key_field, "empty key");

  const std::string owner = fmt::format("metadata key #{} (\"{}\")", index, printable(key));
  if (!keys_.insert(key).second) cur_.fail(key_at, Field{owner}, "duplicate key");

  const uint64_t type_at = cur_.pos();
  const ValueType type = read_value_type(Field{owner, "value type"});
  const uint64_t value_at = cur_.pos();
  Value value = read_value(type, Field{owner, "value"}, 0);
  if (key == "general.alignment") apply_alignment(value, owner, type_at, value_at);
  header_.metadata.push_back(MetadataEntry{std::string(key), std::move(value)});
}

// general.alignment decides where the data section and every tensor start, so it must be
// exactly what the spec says: a u32 power of two.
void Parser::apply_alignment(const Value& value, std::string_view owner, uint64_t type_at, uint64_t value_at) {
  if (value.type != ValueType::UINT32) {
    cur_.fail(type_at, Field{owner, "value type"},
              fmt::format("alignment must be u32, found {}", value_type_name(value.type)));
  }
  if (!valid_alignment(value.u)) {
    cur_.fail(value_at, Field{owner, "value"}, fmt::format("alignment {} is not a non-zero power of two", value.u));
  }
  header_.alignment = value.u;
}

ValueType Parser::read_value_type(const Field& field) {
  const uint64_t at = cur_.pos();
  const auto raw = cur_.read<uint32_t>(field);
  if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
    cur_.fail(at, field, fmt::format("unknown value type {}", raw));
  }
  return static_cast<ValueType>(raw);
}

Value Parser::read_value(ValueType type, const Field& field, int depth) {
  Value value;
  value.type = type;
  const uint64_t at = cur_.pos();
  switch (type) {
    case ValueType::UINT8: value.u = cur_.read<uint8_t>(field); break;
    case ValueType::INT8: value.i = cur_.read<int8_t>(field); break;
    case ValueType::UINT16: value.u = cur_.read<uint16_t>(field); break;
    case ValueType::INT16: value.i = cur_.read<int16_t>(field); break;
    case ValueType::UINT32: value.u = cur_.read<uint32_t>(field); break;
    case ValueType::INT32: value.i = cur_.read<int32_t>(field); break;
    case ValueType::UINT64: value.u = cur_.read<uint64_t>(field); break;
    case ValueType::INT64: value.i = cur_.read<int64_t>(field); break;
    case ValueType::FLOAT32: value.f = cur_.read<float>(field); break;
    case ValueType::FLOAT64: value.f = cur_.read<double>(field); break;
    case ValueType::BOOL:
      value.u = cur_.read<uint8_t>(field);
      if (value.u > 1) cur_.fail(at, field, fmt::format("bool byte {} is neither 0 nor 1", value.u));
      break;
    case ValueType::STRING: value.s = cur_.read_string(field, UINT64_MAX); break;
    case ValueType::ARRAY: read_array(value, field, depth); break;
  }
  return value;
}

// `depth` counts the arrays enclosing `array`; the check keeps recursion bounded.
void Parser::read_array(Value& array, const Field& field, int depth) {
  const Field type_field{field.owner, "array element type", field.element};
  const uint64_t type_at = cur_.pos();
  array.array_type = read_value_type(type_field);
  if (array.array_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
    cur_.fail(type_at, type_field, fmt::format("arrays nested more than {} deep", kMaxArrayDepth));
  }

  const Field length_field{field.owner, "array length", field.element};
  const uint64_t length_at = cur_.pos();
  const auto length = cur_.read<uint64_t>(length_field);
  cur_.check_count(length, min_encoded_bytes(array.array_type), length_field, length_at);
  for (uint64_t i = 0; i < length; ++i) {
    array.array.push_back(read_value(array.array_type, Field{field.owner, "value", i}, depth + 1));
  }
}

void Parser::read_tensor_info(uint64_t index) {
  const std::string prefix = fmt::format("tensor #{}", index);
  const uint64_t name_at = cur_.pos();
  const std::string_view name = cur_.read_string(Field{prefix, "name"}, kMaxTensorNameLength);
  const std::string owner = fmt::format("tensor #{} \"{}\"", index, printable(name));
  if (!tensor_names_.insert(name).second) cur_.fail(name_at, Field{owner}, "duplicate tensor name");

  TensorInfo tensor;
  tensor.name = name;
  const Field rank_field{owner, "rank"};
  uint64_t at = cur_.pos();
  const auto rank = cur_.read<uint32_t>(rank_field);
  if (rank < 1 || rank > kMaxDims) {
    cur_.fail(at, rank_field, fmt::format("rank {} is outside 1..{}", rank, kMaxDims));
  }

  // ggml counts elements in int64_t, so the product must stay below 2^63.
  tensor.n_elements = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    const std::string part = fmt::format("dimension {}", d);
    const Field dim_field{owner, part};
    at = cur_.pos();
    const auto dim = cur_.read<uint64_t>(dim_field);
    if (dim == 0) cur_.fail(at, dim_field, "is 0 (every dimension must be at least 1)");
    if (__builtin_mul_overflow(tensor.n_elements, dim, &tensor.n_elements) ||
        tensor.n_elements > static_cast<uint64_t>(INT64_MAX)) {
      cur_.fail(at, dim_field, fmt::format("{} makes the element count overflow 2^63", dim));
    }
    tensor.dims.push_back(dim);
  }

  // ggml stores rows as whole blocks, so the contiguous dimension must divide into blocks.
  const Field type_field{owner, "type"};
  at = cur_.pos();
  tensor.type = cur_.read<uint32_t>(type_field);
  const TypeTraits* traits = find_type_traits(tensor.type);
  if (traits == nullptr) cur_.fail(at, type_field, fmt::format("unknown ggml type id {}", tensor.type));
  if (tensor.dims[0] % traits->block_size != 0) {
    cur_.fail(at, type_field,
              fmt::format("dimension 0 ({}) is not a multiple of the {} block size {}", tensor.dims[0], traits->name,
                          traits->block_size));
  }
  const uint64_t blocks = tensor.n_elements / traits->block_size;
  if (blocks > UINT64_MAX / traits->type_size) {
    cur_.fail(at, type_field,
              fmt::format("{} {} elements overflow a 64-bit byte size", tensor.n_elements, traits->name));
  }
  tensor.n_bytes = blocks * traits->type_size;

  offset_at_.push_back(cur_.pos());
  tensor.offset = cur_.read<uint64_t>(Field{owner, "offset"});
  header_.tensors.push_back(std::move(tensor));
}

// The data section starts at the end of the tensor infos rounded up to the alignment.
void Parser::check_tensor_data() {
  const uint64_t alignment = header_.alignment;
  header_.data_offset = (cur_.pos() + alignment - 1) / alignment * alignment;
  const uint64_t data_size = cur_.size() > header_.data_offset ? cur_.size() - header_.data_offset : 0;
  for (size_t i = 0; i < header_.tensors.size(); ++i) {
    const TensorInfo& tensor = header_.tensors[i];
    const std::string owner = fmt::format("tensor #{} \"{}\"", i, printable(tensor.name));
    if (tensor.offset % alignment != 0) {
      cur_.fail(offset_at_[i], Field{owner, "offset"},
                fmt::format("{} is not a multiple of the alignment {}", tensor.offset, alignment));
    }
    if (tensor.offset > data_size || tensor.n_bytes > data_size - tensor.offset) {
      cur_.fail(offset_at_[i], Field{owner},
                fmt::format("data [offset {}, {} bytes] extends past end of file (data section at "
                            "byte {}, file size {})",
                            tensor.offset, tensor.n_bytes, header_.data_offset, cur_.size()));
    }
  }
}

}  // namespace

Header parse_header(const uint8_t* data, uint64_t size, std::string_view label) {
  return Parser(data, size, label).run();
}

}  // namespace kvslim::gguf::detail
