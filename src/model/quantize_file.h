// Quantizes a GGUF model file to a preset (`kvslim quantize`): every quantizable matrix is
// converted to the type quantize_preset.h picks for it, everything else is copied byte for byte,
// and the metadata is copied with general.file_type and general.quantization_version set, as
// llama-quantize does. The output appears atomically (temporary file + rename): any error
// leaves no file behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/quantize_preset.h"
#include "util/thread_pool.h"

namespace kvslim {

struct QuantizeOptions {
  std::string preset = "q4_k_m";
  bool allow_requantize = false;  // accept already-quantized input (dequantized, then requantized)
};

// One tensor's outcome, reported as soon as it is converted.
struct QuantizedTensor {
  int index = 0;  // 1-based position in the file
  int count = 0;  // tensors in the file
  std::string name;
  std::vector<uint64_t> dims;
  std::string from_type;    // input type name
  DType type = DType::F32;  // written type (when quantized)
  bool quantized = false;   // false: copied as it was
  bool fallback = false;    // the preset's type could not hold the rows
  DType wanted = DType::F32;
  double rmse = 0;  // root mean square error against the input values (quantized only)
  uint64_t bytes_in = 0, bytes_out = 0;
};

struct QuantizeSummary {
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
  int tensors = 0, quantized = 0, fallbacks = 0;
  double seconds = 0;
};

// Throws kvslim::Error for an unknown preset, an unreadable or corrupt input, a quantized input
// without allow_requantize, an input type kvslim cannot convert, an output path equal to the
// input or in a directory that cannot be written.
QuantizeSummary quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options,
                              ThreadPool& pool, const std::function<void(const QuantizedTensor&)>& on_tensor = {});

}  // namespace kvslim
