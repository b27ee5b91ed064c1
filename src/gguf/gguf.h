// GGUF v2/v3 files: a validating, memory-mapped reader and a writer.
// Spec: ggml docs/gguf.md. Every count, length, type, rank, dimension, offset and alignment is
// checked against the file size before use; a bad file throws kvslim::Error naming the field
// and its byte offset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvslim::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* value_type_name(ValueType type);

// The ggml tensor type ids (only the ones kvslim computes with have enumerators; the reader
// accepts any known ggml type id for size computation and reports unsupported ones by name).
enum class TensorType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30 };
const char* tensor_type_name(uint32_t type_id);  // "f32", "q4_k", ... or "unknown(N)"

// One metadata value. Scalars live in the matching field; arrays in `array`, whose element
// type is `array_type`.
struct Value {
  ValueType type = ValueType::UINT32;
  uint64_t u = 0;  // UINT8..UINT64, BOOL (0/1)
  int64_t i = 0;   // INT8..INT64
  double f = 0;    // FLOAT32, FLOAT64
  std::string s;   // STRING
  ValueType array_type = ValueType::UINT32;
  std::vector<Value> array;

  static Value of_u32(uint32_t v);
  static Value of_i32(int32_t v);
  static Value of_u64(uint64_t v);
  static Value of_f32(float v);
  static Value of_bool(bool v);
  static Value of_string(std::string v);
  static Value of_string_array(const std::vector<std::string>& v);
  static Value of_f32_array(const std::vector<float>& v);
  static Value of_i32_array(const std::vector<int32_t>& v);
};

struct MetadataEntry {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // dims[0] is the contiguous (fastest) dimension, as in ggml
  uint32_t type = 0;           // ggml type id
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

// Bytes of `n_elements` elements of a ggml type; throws for an unknown type or an element count
// that is not a whole number of blocks.
uint64_t tensor_bytes(uint32_t type_id, uint64_t n_elements);

// Where an opened file's bytes live. Mapped: a read-only mapping of the file (nothing is read
// until touched; the page cache is shared with other processes). InMemory: read once into
// anonymous memory advised for 2 MiB pages, then made read-only. Weights in 4 KiB pages cost a
// TLB miss per row a GEMM packs (every row of a weight matrix is a page or more apart); on a Zen 5
// VM an F16 prefill spent 6% of its time there mapped and 2.6% in memory (2026-11-29).
enum class Residency { Mapped, InMemory };

class File {
 public:
  // Opens and validates the whole header. Throws kvslim::Error.
  static File open(const std::string& path, Residency residency = Residency::Mapped);
  // Parses an in-memory image (used by tests and by the fuzz corpus); the buffer is copied.
  static File from_bytes(const std::vector<uint8_t>& bytes, std::string label = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  Residency residency() const;  // from_bytes: InMemory (a heap copy, not advised for huge pages)
  const std::vector<MetadataEntry>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;
  // Pointer to the tensor's bytes inside the mapping (valid while the File lives).
  const uint8_t* tensor_data(const TensorInfo& tensor) const;

  // Typed getters: throw kvslim::Error naming the key if it is missing or of another type.
  // Integer getters accept any integer type whose value fits; float getters accept F32/F64.
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  // Optional variants return nullopt when the key is absent (still throw on a wrong type).
  std::optional<std::string> get_string_opt(std::string_view key) const;
  std::optional<uint64_t> get_uint_opt(std::string_view key) const;
  std::optional<double> get_float_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;

 private:
  File() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  const uint8_t* base_ = nullptr;
  std::vector<MetadataEntry> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Writes GGUF v3. Tensors are laid out in the order added, each aligned to `general.alignment`
// (32 unless set). The file is written to a temporary name and renamed, so a crash never
// leaves a half-written model behind.
class Writer {
 public:
  void set(std::string key, Value value);  // replaces an existing key
  // The writer keeps a copy of the bytes; dims[0] is the contiguous dimension.
  void add_tensor(std::string name, uint32_t type_id, std::vector<uint64_t> dims, std::vector<uint8_t> bytes);
  void write(const std::string& path) const;

 private:
  std::vector<MetadataEntry> metadata_;
  struct PendingTensor {
    TensorInfo info;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingTensor> tensors_;
};

}  // namespace kvslim::gguf
