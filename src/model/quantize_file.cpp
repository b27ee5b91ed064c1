#include "model/quantize_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>

#include "gguf/gguf.h"
#include "util/error.h"

namespace kvslim {
namespace {

// The GGUF quantization version of the block layouts written (ggml's GGML_QNT_VERSION).
constexpr uint32_t kQuantizationVersion = 2;

bool is_plain_float(uint32_t type_id) {
  return type_id == ggml_type_id(DType::F32) || type_id == ggml_type_id(DType::F16) ||
         type_id == ggml_type_id(DType::BF16);
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Refuses, before any work, an output the writer could not put in place (so a long run never
// ends in a write error) or one that is the input itself.
void check_output_path(const std::string& in_path, const std::string& out_path) {
  if (out_path.empty()) fail("no output path given");
  struct stat in_stat {
  }, out_stat{};
  if (::stat(out_path.c_str(), &out_stat) == 0) {
    if (S_ISDIR(out_stat.st_mode)) fail("{}: output is a directory", out_path);
    if (::stat(in_path.c_str(), &in_stat) == 0 && in_stat.st_dev == out_stat.st_dev &&
        in_stat.st_ino == out_stat.st_ino) {
      fail("{}: output is the input file; write to another path", out_path);
    }
  }
  const std::string dir = directory_of(out_path);
  struct stat dir_stat {};
  if (::stat(dir.c_str(), &dir_stat) != 0 || !S_ISDIR(dir_stat.st_mode)) {
    fail("{}: cannot write the output: directory {} does not exist", out_path, dir);
  }
  if (::access(dir.c_str(), W_OK) != 0)
    fail("{}: cannot write the output: directory {} is not writable", out_path, dir);
}

uint32_t metadata_uint(const gguf::File& file, const std::string& key, uint32_t fallback) {
  const std::optional<uint64_t> v = file.get_uint_opt(key);
  return v ? uint32_t(*v) : fallback;
}

// Converts one tensor's rows to `type` in parallel; returns the bytes and the RMSE of the
// written values against the input values.
std::vector<uint8_t> convert_rows(const uint8_t* src, DType src_type, int64_t rows, int64_t row_length, DType type,
                                  ThreadPool& pool, double& rmse) {
  const size_t in_row = row_bytes(src_type, row_length);
  const size_t out_row = row_bytes(type, row_length);
  std::vector<uint8_t> out(out_row * size_t(rows));
  std::mutex mutex;
  double squared = 0;
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(row_length)), back(static_cast<size_t>(row_length));
    double local = 0;
    for (int64_t r = begin; r < end; ++r) {
      convert_to_f32(src_type, src + size_t(r) * in_row, x.data(), row_length);
      uint8_t* dst = out.data() + size_t(r) * out_row;
      convert_from_f32(x.data(), type, dst, row_length);
      convert_to_f32(type, dst, back.data(), row_length);
      for (int64_t j = 0; j < row_length; ++j) {
        const double d = double(x[size_t(j)]) - double(back[size_t(j)]);
        local += d * d;
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    squared += local;
  });
  rmse = std::sqrt(squared / (double(rows) * double(row_length)));
  return out;
}

}  // namespace

QuantizeSummary quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options,
                              ThreadPool& pool, const std::function<void(const QuantizedTensor&)>& on_tensor) {
  const auto start = std::chrono::steady_clock::now();
  const QuantPresetInfo& preset = quant_preset_from_name(options.preset);
  check_output_path(in_path, out_path);
  const gguf::File in = gguf::File::open(in_path);

  const std::string arch = in.get_string("general.architecture");
  const uint32_t n_layers = metadata_uint(in, arch + ".block_count", 1);
  const uint32_t n_heads = metadata_uint(in, arch + ".attention.head_count", 1);
  const uint32_t n_kv_heads = metadata_uint(in, arch + ".attention.head_count_kv", n_heads);
  if (n_layers == 0 || n_heads == 0 || n_kv_heads == 0) {
    fail("{}: {}.block_count / attention.head_count / head_count_kv must be > 0", in_path, arch);
  }
  const bool has_output = in.find_tensor("output.weight") != nullptr;

  // Decide every tensor's type first, so that a refused input fails before any work.
  struct Plan {
    const gguf::TensorInfo* info;
    bool quantize = false;
    TensorTypeChoice choice{DType::F32, DType::F32, false};
  };
  std::vector<Plan> plans;
  for (const gguf::TensorInfo& t : in.tensors()) {
    Plan plan{&t};
    if (is_quantizable_tensor(t.name, t.dims)) {
      TensorRole role;
      role.name = t.name;
      role.layer = tensor_layer(t.name);
      role.n_layers = int(n_layers);
      role.gqa = int(n_heads / n_kv_heads);
      role.model_has_output = has_output;
      role.row_length = int64_t(t.dims[0]);
      role.expert = t.dims.size() >= 3 && t.dims[2] > 1;
      plan.choice = choose_tensor_type(preset, role);
      // A tensor already in the chosen type is copied (as llama-quantize does), and so is an
      // mxfp4 one whatever the preset asks (see quantize_preset.h).
      plan.quantize = ggml_type_id(plan.choice.type) != t.type && t.type != ggml_type_id(DType::MXFP4);
      if (plan.quantize && !is_plain_float(t.type)) {
        const DType from = dtype_from_ggml(t.type);  // throws, naming a type kvslim cannot read
        if (!options.allow_requantize) {
          fail(
              "{}: tensor {} is already quantized ({}); requantizing loses quality, pass --allow-requantize to do it "
              "anyway",
              in_path, t.name, dtype_name(from));
        }
      }
    }
    plans.push_back(plan);
  }

  gguf::Writer writer;
  for (const gguf::MetadataEntry& entry : in.metadata()) writer.set(entry.key, entry.value);
  writer.set("general.quantization_version", gguf::Value::of_u32(kQuantizationVersion));
  writer.set("general.file_type", gguf::Value::of_u32(preset.llama_ftype));

  QuantizeSummary summary;
  summary.tensors = int(plans.size());
  int index = 0;
  for (const Plan& plan : plans) {
    const gguf::TensorInfo& t = *plan.info;
    QuantizedTensor report;
    report.index = ++index;
    report.count = summary.tensors;
    report.name = t.name;
    report.dims = t.dims;
    report.from_type = gguf::tensor_type_name(t.type);
    report.bytes_in = t.n_bytes;
    const uint8_t* data = in.tensor_data(t);
    if (!plan.quantize) {
      writer.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(data, data + t.n_bytes));
      report.bytes_out = t.n_bytes;
    } else {
      const int64_t row_length = int64_t(t.dims[0]);
      const int64_t rows = int64_t(t.n_elements) / row_length;
      std::vector<uint8_t> bytes =
          convert_rows(data, dtype_from_ggml(t.type), rows, row_length, plan.choice.type, pool, report.rmse);
      report.quantized = true;
      report.type = plan.choice.type;
      report.wanted = plan.choice.wanted;
      report.fallback = plan.choice.fallback;
      report.bytes_out = bytes.size();
      writer.add_tensor(t.name, ggml_type_id(plan.choice.type), t.dims, std::move(bytes));
      ++summary.quantized;
      if (plan.choice.fallback) ++summary.fallbacks;
    }
    summary.bytes_in += report.bytes_in;
    summary.bytes_out += report.bytes_out;
    if (on_tensor) on_tensor(report);
  }
  writer.write(out_path);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace kvslim
