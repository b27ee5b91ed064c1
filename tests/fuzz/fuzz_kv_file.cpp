// libFuzzer target for the compressed-KV file reader (optional CMake target kvslim_fuzz_kv_file,
// -DKVSLIM_FUZZ=ON with clang): the files `generate --save-kv`/`--load-kv`, `chat` and the
// server's slot save/restore read from disk. The input is the whole file (kv_file_input.h: the
// model it is read for). The reader is built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, which
// skips only the whole-file checksum (a mutated file would never get past it).
//
// read_kv_contents must either throw kvslim::Error or return contents that keep every promise of
// kv_file.h: any other exception, a broken promise, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kv_file_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const kvslim::KvFileContents c = kvslim::fuzz::read_fuzz_kv(std::vector<uint8_t>(data, data + size));
    if (const char* broken = kvslim::fuzz::broken_promise(c)) {
      std::fprintf(stderr, "read_kv_contents returned contents with %s\n", broken);
      __builtin_trap();
    }
  } catch (const kvslim::Error&) {
    // the clear refusal a malformed file must end in
  }
  return 0;
}
