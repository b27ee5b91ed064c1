#include "model/weight_residency.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.h"

namespace kvslim {

gguf::Residency choose_weight_residency(const char* mmap_env, uint64_t file_bytes,
                                        std::optional<uint64_t> mem_available_bytes) {
  if (mmap_env != nullptr) {
    const std::string_view v(mmap_env);
    if (v == "1") return gguf::Residency::Mapped;
    if (v == "0") return gguf::Residency::InMemory;
    fail("KVSLIM_MMAP must be 0 (read the weights into memory) or 1 (map the file), not '{}'", v);
  }
  if (!mem_available_bytes) return gguf::Residency::Mapped;
  return file_bytes <= *mem_available_bytes / 4 * 3 ? gguf::Residency::InMemory : gguf::Residency::Mapped;
}

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t at = meminfo.find(kKey);
  // The key starts a line.
  while (at != std::string_view::npos && at != 0 && meminfo[at - 1] != '\n') at = meminfo.find(kKey, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  size_t p = at + kKey.size();
  while (p < meminfo.size() && meminfo[p] == ' ') ++p;
  uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(meminfo.data() + p, meminfo.data() + meminfo.size(), kib);
  if (ec != std::errc() || end == meminfo.data() + p) return std::nullopt;
  const std::string_view unit = meminfo.substr(static_cast<size_t>(end - meminfo.data()), 3);
  if (unit != " kB" || kib > UINT64_MAX / 1024) return std::nullopt;
  return kib * 1024;
}

gguf::Residency weight_residency(uint64_t file_bytes) {
  std::optional<uint64_t> available;
  if (std::ifstream meminfo("/proc/meminfo"); meminfo) {
    std::ostringstream text;
    text << meminfo.rdbuf();
    available = parse_mem_available(text.str());
  }
  return choose_weight_residency(std::getenv("KVSLIM_MMAP"), file_bytes, available);
}

const char* residency_name(gguf::Residency residency) {
  return residency == gguf::Residency::InMemory ? "memory (2 MiB pages)" : "mapped file";
}

}  // namespace kvslim
