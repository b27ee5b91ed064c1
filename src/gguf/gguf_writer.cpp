// Writer: GGUF v3 in the standard layout llama.cpp reads — header, metadata, tensor infos,
// zero padding to the alignment, then each tensor's bytes, each padded to the alignment.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>

#include "gguf/ggml_types.h"
#include "gguf/gguf.h"
#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace kvslim::gguf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer copies host integers straight into little-endian fields");

constexpr uint32_t kWrittenVersion = 3;
// llama.cpp keeps names in a 64-byte field with a terminating NUL.
constexpr size_t kMaxWrittenNameLength = 63;

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Appends little-endian fields to a growing buffer.
class ByteSink {
 public:
  // Starting with room avoids reallocations for typical headers (and a GCC 12 false
  // -Wstringop-overflow on inserting into an empty vector).
  ByteSink() { bytes_.reserve(4096); }
  template <class T>
  void put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_raw(std::string_view text) { bytes_.insert(bytes_.end(), text.begin(), text.end()); }
  void put_string(std::string_view text) {
    put<uint64_t>(text.size());
    put_raw(text);
  }
  void pad_to(uint64_t alignment) { bytes_.resize(align_up(bytes_.size(), alignment), 0); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void check_value_type(ValueType type, std::string_view key) {
  if (static_cast<uint32_t>(type) > static_cast<uint32_t>(ValueType::FLOAT64)) {
    fail("gguf writer: key \"{}\": unknown value type {}", key, static_cast<uint32_t>(type));
  }
}

void put_value(ByteSink& sink, const Value& value, std::string_view key) {
  check_value_type(value.type, key);
  switch (value.type) {
    case ValueType::UINT8: sink.put(static_cast<uint8_t>(value.u)); break;
    case ValueType::INT8: sink.put(static_cast<int8_t>(value.i)); break;
    case ValueType::UINT16: sink.put(static_cast<uint16_t>(value.u)); break;
    case ValueType::INT16: sink.put(static_cast<int16_t>(value.i)); break;
    case ValueType::UINT32: sink.put(static_cast<uint32_t>(value.u)); break;
    case ValueType::INT32: sink.put(static_cast<int32_t>(value.i)); break;
    case ValueType::UINT64: sink.put(value.u); break;
    case ValueType::INT64: sink.put(value.i); break;
    case ValueType::FLOAT32: sink.put(static_cast<float>(value.f)); break;
    case ValueType::FLOAT64: sink.put(value.f); break;
    case ValueType::BOOL: sink.put(static_cast<uint8_t>(value.u != 0)); break;
    case ValueType::STRING: sink.put_string(value.s); break;
    case ValueType::ARRAY:
      check_value_type(value.array_type, key);
      sink.put(static_cast<uint32_t>(value.array_type));
      sink.put<uint64_t>(value.array.size());
      for (size_t i = 0; i < value.array.size(); ++i) {
        // The file stores one type per array, so every element must have it.
        if (value.array[i].type != value.array_type) {
          fail("gguf writer: key \"{}\": array element #{} has type {} but the array holds {}", key, i,
               value_type_name(value.array[i].type), value_type_name(value.array_type));
        }
        put_value(sink, value.array[i], key);
      }
      break;
  }
}

// Writes to `path + ".tmp"` and renames it over `path` on commit(); an uncommitted file is
// removed, so a failed write never leaves a partial model behind.
class TempFile {
 public:
  explicit TempFile(const std::string& path) : path_(path), tmp_path_(path + ".tmp") {
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot open for writing: {}", tmp_path_, std::strerror(errno));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_path_.c_str());
  }

  void write(const uint8_t* data, size_t size) {
    while (size > 0) {
      const ssize_t written = ::write(fd_, data, size);
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) fail("{}: write failed: {}", tmp_path_, std::strerror(errno));
      data += written;
      size -= static_cast<size_t>(written);
    }
  }

  void write_zeros(uint64_t count) {
    static constexpr std::array<uint8_t, 4096> kZeros{};
    while (count > 0) {
      const size_t chunk = std::min<uint64_t>(count, kZeros.size());
      write(kZeros.data(), chunk);
      count -= chunk;
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", tmp_path_, std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("{}: close failed: {}", tmp_path_, std::strerror(errno));
    if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
      fail("{}: cannot rename {} into place: {}", path_, tmp_path_, std::strerror(errno));
    }
    committed_ = true;
  }

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void Writer::set(std::string key, Value value) {
  if (key.empty() || key.size() > detail::kMaxKeyLength) {
    fail("gguf writer: metadata key \"{}\" must be 1..{} bytes long", key, detail::kMaxKeyLength);
  }
  for (MetadataEntry& entry : metadata_) {
    if (entry.key == key) {
      entry.value = std::move(value);
      return;
    }
  }
  metadata_.push_back(MetadataEntry{std::move(key), std::move(value)});
}

void Writer::add_tensor(std::string name, uint32_t type_id, std::vector<uint64_t> dims, std::vector<uint8_t> bytes) {
  if (name.empty() || name.size() > kMaxWrittenNameLength) {
    fail("gguf writer: tensor name \"{}\" must be 1..{} bytes long", name, kMaxWrittenNameLength);
  }
  for (const PendingTensor& tensor : tensors_) {
    if (tensor.info.name == name) fail("gguf writer: tensor \"{}\" added twice", name);
  }
  if (dims.empty() || dims.size() > detail::kMaxDims) {
    fail("gguf writer: tensor \"{}\": rank {} is outside 1..{}", name, dims.size(), detail::kMaxDims);
  }
  uint64_t n_elements = 1;
  for (uint64_t dim : dims) {
    if (dim == 0 || __builtin_mul_overflow(n_elements, dim, &n_elements) ||
        n_elements > static_cast<uint64_t>(INT64_MAX)) {
      fail("gguf writer: tensor \"{}\": dimensions must be at least 1 with a product below 2^63", name);
    }
  }
  const detail::TypeTraits* traits = detail::find_type_traits(type_id);
  if (traits == nullptr) fail("gguf writer: tensor \"{}\": unknown ggml type id {}", name, type_id);
  if (dims[0] % traits->block_size != 0) {
    fail("gguf writer: tensor \"{}\": dimension 0 ({}) is not a multiple of the {} block size {}", name, dims[0],
         traits->name, traits->block_size);
  }
  const uint64_t n_bytes = tensor_bytes(type_id, n_elements);
  if (bytes.size() != n_bytes) {
    fail("gguf writer: tensor \"{}\": {} bytes given, {} {} elements take {}", name, bytes.size(), n_elements,
         traits->name, n_bytes);
  }
  PendingTensor tensor;
  tensor.info.name = std::move(name);
  tensor.info.dims = std::move(dims);
  tensor.info.type = type_id;
  tensor.info.n_elements = n_elements;
  tensor.info.n_bytes = n_bytes;
  tensor.bytes = std::move(bytes);
  tensors_.push_back(std::move(tensor));
}

void Writer::write(const std::string& path) const {
  uint64_t alignment = detail::kDefaultAlignment;
  for (const MetadataEntry& entry : metadata_) {
    if (entry.key != "general.alignment") continue;
    if (entry.value.type != ValueType::UINT32 || !detail::valid_alignment(entry.value.u)) {
      fail("{}: general.alignment must be a u32 non-zero power of two", path);
    }
    alignment = entry.value.u;
  }

  ByteSink header;
  header.put_raw("GGUF");
  header.put(kWrittenVersion);
  header.put<uint64_t>(tensors_.size());
  header.put<uint64_t>(metadata_.size());
  for (const MetadataEntry& entry : metadata_) {
    header.put_string(entry.key);
    check_value_type(entry.value.type, entry.key);
    header.put(static_cast<uint32_t>(entry.value.type));
    put_value(header, entry.value, entry.key);
  }
  // Offsets are relative to the data section; each tensor starts on an aligned boundary.
  uint64_t offset = 0;
  for (const PendingTensor& tensor : tensors_) {
    header.put_string(tensor.info.name);
    header.put(static_cast<uint32_t>(tensor.info.dims.size()));
    for (uint64_t dim : tensor.info.dims) header.put(dim);
    header.put(tensor.info.type);
    header.put(offset);
    offset = align_up(offset + tensor.bytes.size(), alignment);
  }
  header.pad_to(alignment);

  TempFile out(path);
  out.write(header.bytes().data(), header.bytes().size());
  for (const PendingTensor& tensor : tensors_) {
    out.write(tensor.bytes.data(), tensor.bytes.size());
    out.write_zeros(align_up(tensor.bytes.size(), alignment) - tensor.bytes.size());
  }
  out.commit();
}

}  // namespace kvslim::gguf
