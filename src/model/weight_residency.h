// Whether a model's weights are read into memory (2 MiB pages) or used from a mapping of the
// file (gguf::Residency). In memory is faster (TLB misses; see gguf::Residency) but costs a
// read of the whole file at load and memory of its size that other processes cannot share.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gguf/gguf.h"

namespace kvslim {

// The rule, from its inputs. mmap_env: the value of KVSLIM_MMAP, or null when unset. "1" maps
// the file, "0" reads it into memory; unset, the file is read into memory when it takes at most
// three quarters of the memory available (MemAvailable), else mapped (so that a model near the
// machine's memory still pages in from its file rather than pushing everything else out), and
// mapped when the available memory is unknown. Any other value of KVSLIM_MMAP throws.
gguf::Residency choose_weight_residency(const char* mmap_env, uint64_t file_bytes,
                                        std::optional<uint64_t> mem_available_bytes);

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt when absent or malformed.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);

// choose_weight_residency for this process: KVSLIM_MMAP and /proc/meminfo as they are now.
gguf::Residency weight_residency(uint64_t file_bytes);

// "memory (2 MiB pages)" or "mapped file", for reports.
const char* residency_name(gguf::Residency residency);

}  // namespace kvslim
