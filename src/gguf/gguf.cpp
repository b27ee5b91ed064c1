// File: owns the bytes of a GGUF file (a read-only mapping, a read-only copy in huge-page-advised
// memory, or a heap copy for from_bytes),
// parses them with gguf_parse, and answers typed metadata queries.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "gguf/gguf_parse.h"
#include "util/error.h"

namespace kvslim::gguf {

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "u8";
    case ValueType::INT8: return "i8";
    case ValueType::UINT16: return "u16";
    case ValueType::INT16: return "i16";
    case ValueType::UINT32: return "u32";
    case ValueType::INT32: return "i32";
    case ValueType::FLOAT32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "u64";
    case ValueType::INT64: return "i64";
    case ValueType::FLOAT64: return "f64";
  }
  return "unknown";
}

namespace {

Value scalar(ValueType type) {
  Value value;
  value.type = type;
  return value;
}

template <class T, class Make>
Value array_of(ValueType element_type, const std::vector<T>& items, Make make) {
  Value array = scalar(ValueType::ARRAY);
  array.array_type = element_type;
  array.array.reserve(items.size());
  for (const T& item : items) array.array.push_back(make(item));
  return array;
}

}  // namespace

Value Value::of_u32(uint32_t v) {
  Value value = scalar(ValueType::UINT32);
  value.u = v;
  return value;
}
Value Value::of_i32(int32_t v) {
  Value value = scalar(ValueType::INT32);
  value.i = v;
  return value;
}
Value Value::of_u64(uint64_t v) {
  Value value = scalar(ValueType::UINT64);
  value.u = v;
  return value;
}
Value Value::of_f32(float v) {
  Value value = scalar(ValueType::FLOAT32);
  value.f = v;
  return value;
}
Value Value::of_bool(bool v) {
  Value value = scalar(ValueType::BOOL);
  value.u = v ? 1 : 0;
  return value;
}
Value Value::of_string(std::string v) {
  Value value = scalar(ValueType::STRING);
  value.s = std::move(v);
  return value;
}
Value Value::of_string_array(const std::vector<std::string>& v) {
  return array_of(ValueType::STRING, v, [](const std::string& s) { return of_string(s); });
}
Value Value::of_f32_array(const std::vector<float>& v) { return array_of(ValueType::FLOAT32, v, of_f32); }
Value Value::of_i32_array(const std::vector<int32_t>& v) { return array_of(ValueType::INT32, v, of_i32); }

// ---------------------------------------------------------------------------------------------
// Owning the bytes

namespace {

// from_bytes copies into a 64-byte aligned buffer so tensor data is as aligned as in a mapping.
constexpr std::align_val_t kCopyAlignment{64};
struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete(p, kCopyAlignment); }
};

// Closes a descriptor on every exit path of File::open.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

struct File::Mapping {
  // Exactly one of the two holds the bytes: a region of the address space (the file's mapping,
  // or the anonymous memory it was read into, from `bytes` on), or a heap copy.
  void* region = nullptr;
  size_t region_size = 0;
  const uint8_t* bytes = nullptr;
  Residency residency = Residency::Mapped;
  std::unique_ptr<uint8_t, AlignedFree> copy;

  ~Mapping() {
    if (region != nullptr) ::munmap(region, region_size);
  }
  const uint8_t* data() const { return region ? bytes : copy.get(); }
  static void read_into_huge_pages(int fd, const std::string& path, size_t size, Mapping& out);

  // Parses the bytes and builds the File that owns them. Mapping is nested in File, so it may
  // fill File's private fields; this keeps parser details out of the public header.
  static File adopt(std::unique_ptr<Mapping> mapping, uint64_t size, std::string label) {
    File file;
    const uint8_t* base = mapping->data();
    file.mapping_ = std::move(mapping);
    detail::Header header = detail::parse_header(base, size, label);
    file.path_ = std::move(label);
    file.base_ = base;
    file.size_ = size;
    file.version_ = header.version;
    file.alignment_ = header.alignment;
    file.data_offset_ = header.data_offset;
    file.metadata_ = std::move(header.metadata);
    file.tensors_ = std::move(header.tensors);
    return file;
  }
};

// Reads the file into anonymous memory that starts on a 2 MiB boundary and is advised for
// transparent huge pages (a kernel without them, or with them off, gives 4 KiB pages: slower,
// still correct), then makes it read-only like a mapping.
void File::Mapping::read_into_huge_pages(int fd, const std::string& path, size_t size, Mapping& out) {
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t region_size = size + kHugePage;
  void* region = ::mmap(nullptr, region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) fail("{}: cannot allocate {} bytes to read it into: {}", path, size, std::strerror(errno));
  out.region = region;  // from here on, ~Mapping frees it whatever happens
  out.region_size = region_size;
  auto* bytes = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region) + kHugePage - 1) & ~(kHugePage - 1));
  ::madvise(bytes, size, MADV_HUGEPAGE);  // advice only: its failure changes the page size, not the bytes
  for (size_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("{}: read failed at byte {}: {}", path, done, std::strerror(errno));
    if (got == 0) fail("{}: file ended at byte {} of {} while being read (changed on disk?)", path, done, size);
    done += static_cast<size_t>(got);
  }
  if (::mprotect(region, region_size, PROT_READ) != 0)
    fail("{}: cannot make its copy read-only: {}", path, std::strerror(errno));
  out.bytes = bytes;
  out.residency = Residency::InMemory;
}

File File::open(const std::string& path, Residency residency) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  const FdCloser closer{fd};

  struct stat info {};
  if (::fstat(fd, &info) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(info.st_mode)) fail("{}: not a regular file", path);
  if (info.st_size == 0) fail("{}: empty file, not a GGUF model", path);

  auto mapping = std::make_unique<Mapping>();
  const auto size = static_cast<size_t>(info.st_size);
  if (residency == Residency::InMemory) {
    Mapping::read_into_huge_pages(fd, path, size, *mapping);
  } else {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) fail("{}: cannot mmap {} bytes: {}", path, size, std::strerror(errno));
    mapping->region = addr;
    mapping->region_size = size;
    mapping->bytes = static_cast<const uint8_t*>(addr);
  }
  return Mapping::adopt(std::move(mapping), size, path);
}

Residency File::residency() const { return mapping_->residency; }

File File::from_bytes(const std::vector<uint8_t>& bytes, std::string label) {
  if (bytes.empty()) fail("{}: empty buffer, not a GGUF model", label);
  auto mapping = std::make_unique<Mapping>();
  mapping->copy.reset(static_cast<uint8_t*>(::operator new(bytes.size(), kCopyAlignment)));
  mapping->residency = Residency::InMemory;
  std::memcpy(mapping->copy.get(), bytes.data(), bytes.size());
  return Mapping::adopt(std::move(mapping), bytes.size(), std::move(label));
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

const Value* File::find(std::string_view key) const {
  for (const MetadataEntry& entry : metadata_) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& tensor : tensors_) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

const uint8_t* File::tensor_data(const TensorInfo& tensor) const { return base_ + data_offset_ + tensor.offset; }

// ---------------------------------------------------------------------------------------------
// Typed getters

namespace {

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_float(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

std::string type_label(const Value& value) {
  if (value.type != ValueType::ARRAY) return value_type_name(value.type);
  return fmt::format("array of {}", value_type_name(value.array_type));
}

// Shared by the getters: the owning file's name and the key go into every message.
class Lookup {
 public:
  Lookup(const File& file, std::string_view key) : file_(file), key_(key), value_(file.find(key)) {}

  bool present() const { return value_ != nullptr; }
  const Value& value() const {
    if (value_ == nullptr) fail("{}: metadata key \"{}\" is missing", file_.path(), key_);
    return *value_;
  }
  [[noreturn]] void wrong_type(std::string_view expected) const {
    fail("{}: metadata key \"{}\" has type {}, expected {}", file_.path(), key_, type_label(*value_), expected);
  }
  [[noreturn]] void out_of_range(std::string_view shown, std::string_view target) const {
    fail("{}: metadata key \"{}\" value {} does not fit {}", file_.path(), key_, shown, target);
  }

  // One integer scalar (or array element) as uint64 / int64, checking it fits.
  uint64_t to_uint(const Value& v) const {
    if (is_unsigned(v.type)) return v.u;
    if (!is_signed(v.type)) wrong_type("an integer");
    if (v.i < 0) out_of_range(std::to_string(v.i), "an unsigned integer");
    return static_cast<uint64_t>(v.i);
  }
  int64_t to_int(const Value& v) const {
    if (is_signed(v.type)) return v.i;
    if (!is_unsigned(v.type)) wrong_type("an integer");
    if (v.u > static_cast<uint64_t>(INT64_MAX)) out_of_range(std::to_string(v.u), "a signed 64-bit integer");
    return static_cast<int64_t>(v.u);
  }

  const std::vector<Value>& array_where(bool (*element_ok)(ValueType), std::string_view expected) const {
    const Value& v = value();
    if (v.type != ValueType::ARRAY || !element_ok(v.array_type)) wrong_type(expected);
    return v.array;
  }

 private:
  const File& file_;
  std::string_view key_;
  const Value* value_;
};

}  // namespace

std::string File::get_string(std::string_view key) const {
  const Lookup lookup(*this, key);
  if (lookup.value().type != ValueType::STRING) lookup.wrong_type("string");
  return lookup.value().s;
}

uint64_t File::get_uint(std::string_view key) const {
  const Lookup lookup(*this, key);
  return lookup.to_uint(lookup.value());
}

int64_t File::get_int(std::string_view key) const {
  const Lookup lookup(*this, key);
  return lookup.to_int(lookup.value());
}

double File::get_float(std::string_view key) const {
  const Lookup lookup(*this, key);
  if (!is_float(lookup.value().type)) lookup.wrong_type("f32 or f64");
  return lookup.value().f;
}

bool File::get_bool(std::string_view key) const {
  const Lookup lookup(*this, key);
  if (lookup.value().type != ValueType::BOOL) lookup.wrong_type("bool");
  return lookup.value().u != 0;
}

std::vector<std::string> File::get_string_array(std::string_view key) const {
  const Lookup lookup(*this, key);
  const auto& items = lookup.array_where([](ValueType t) { return t == ValueType::STRING; }, "array of string");
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const Value& item : items) out.push_back(item.s);
  return out;
}

std::vector<float> File::get_float_array(std::string_view key) const {
  const Lookup lookup(*this, key);
  const auto& items = lookup.array_where(is_float, "array of f32 or f64");
  std::vector<float> out;
  out.reserve(items.size());
  for (const Value& item : items) out.push_back(static_cast<float>(item.f));
  return out;
}

std::vector<int64_t> File::get_int_array(std::string_view key) const {
  const Lookup lookup(*this, key);
  const auto& items =
      lookup.array_where([](ValueType t) { return is_signed(t) || is_unsigned(t); }, "array of integers");
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (const Value& item : items) out.push_back(lookup.to_int(item));
  return out;
}

std::optional<std::string> File::get_string_opt(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_string(key);
}

std::optional<uint64_t> File::get_uint_opt(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_uint(key);
}

std::optional<double> File::get_float_opt(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_float(key);
}

std::optional<bool> File::get_bool_opt(std::string_view key) const {
  if (find(key) == nullptr) return std::nullopt;
  return get_bool(key);
}

}  // namespace kvslim::gguf
