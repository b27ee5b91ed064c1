#include "model/lookahead_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "gguf/gguf.h"
#include "model/fingerprint.h"
#include "util/error.h"

namespace kvslim {

namespace {

constexpr const char* kArchitecture = "kvslim-lookahead";
constexpr int kMaxLookahead = 4096, kMaxRank = 4096;

std::string lora_tensor(int layer, LoraSite site, char matrix) {
  return fmt::format("blk.{}.{}.lora_{}", layer, lora_site_name(site), matrix);
}

// Reads one f32 tensor of the given ggml dims into `out`, checking everything about it.
void read_tensor(const gguf::File& file, const std::string& name, std::vector<uint64_t> dims, float* out) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("{}: missing tensor '{}'", file.path(), name);
  if (t->dims != dims)
    fail("{}: tensor '{}' has shape [{}], expected [{}]", file.path(), name, fmt::join(t->dims, ", "),
         fmt::join(dims, ", "));
  if (t->type != uint32_t(gguf::TensorType::F32))
    fail("{}: tensor '{}' has type {}, expected f32", file.path(), name, gguf::tensor_type_name(t->type));
  std::memcpy(out, file.tensor_data(*t), t->n_elements * sizeof(float));
  for (uint64_t i = 0; i < t->n_elements; ++i)
    if (!std::isfinite(out[i])) fail("{}: tensor '{}' holds a non-finite value at element {}", file.path(), name, i);
}

std::vector<uint8_t> f32_bytes(const float* values, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(values);
  return std::vector<uint8_t>(p, p + n * sizeof(float));
}

}  // namespace

void AdapterShape::validate() const {
  if (n_lookahead < 1 || n_lookahead > kMaxLookahead)
    fail("--lookahead must be in [1, {}] (got {})", kMaxLookahead, n_lookahead);
  if (rank < 1 || rank > kMaxRank) fail("--rank must be in [1, {}] (got {})", kMaxRank, rank);
  if (!(alpha > 0) || !std::isfinite(alpha)) fail("--alpha must be a finite number > 0 (got {})", alpha);
}

LookaheadAdapter LookaheadAdapter::initial(const Model& base, const AdapterShape& shape, uint64_t seed) {
  shape.validate();
  const ModelConfig& c = base.config();
  // Per-dimension mean and standard deviation of the token embeddings, in double.
  std::vector<double> sum(c.dim, 0.0), sum_sq(c.dim, 0.0);
  std::vector<float> row(c.dim);
  const WeightView& table = base.token_embedding();
  for (int64_t t = 0; t < table.rows; ++t) {
    convert_to_f32(table.type, table.row(t), row.data(), c.dim);
    for (int d = 0; d < c.dim; ++d) {
      sum[d] += row[d];
      sum_sq[d] += double(row[d]) * row[d];
    }
  }
  LookaheadAdapter a;
  a.n_lookahead = shape.n_lookahead;
  a.base_fingerprint = model_fingerprint(base);
  a.lora = LoraAdapter(c, shape.rank, shape.alpha);
  a.embd.resize(size_t(shape.n_lookahead) * c.dim);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const double n = double(table.rows);
  for (int i = 0; i < shape.n_lookahead; ++i)
    for (int d = 0; d < c.dim; ++d) {
      const double mean = sum[d] / n, var = std::max(0.0, sum_sq[d] / n - mean * mean);
      a.embd[size_t(i) * c.dim + d] = float(mean + std::sqrt(var) * normal(rng));
    }
  for (int l = 0; l < c.n_layers; ++l)
    for (LoraSite site : kAllLoraSites) {
      const float bound = 1.0f / std::sqrt(float(a.lora.in(site)));
      std::uniform_real_distribution<float> uniform(-bound, bound);
      float* m = a.lora.a(l, site);
      for (int64_t i = 0; i < int64_t(shape.rank) * a.lora.in(site); ++i) m[i] = uniform(rng);
    }
  return a;
}

LookaheadAdapter LookaheadAdapter::load(const std::string& path, const ModelConfig& base, uint64_t base_fingerprint) {
  const gguf::File file = gguf::File::open(path);
  const std::string arch = file.get_string("general.architecture");
  if (arch != kArchitecture)
    fail("{}: general.architecture is '{}', not a LookaheadKV adapter ('{}')", path, arch, kArchitecture);
  LookaheadAdapter a;
  a.base_fingerprint = file.get_uint("lookahead.base_fingerprint");
  if (a.base_fingerprint != base_fingerprint)
    fail(
        "{}: the adapter was made for the base model with fingerprint {:016x}, but this model's fingerprint is "
        "{:016x}",
        path, a.base_fingerprint, base_fingerprint);
  const uint64_t count = file.get_uint("lookahead.count"), rank = file.get_uint("lookahead.lora_rank");
  const double alpha = file.get_float("lookahead.lora_alpha");
  if (count < 1 || count > kMaxLookahead) fail("{}: lookahead.count {} is outside [1, {}]", path, count, kMaxLookahead);
  if (rank < 1 || rank > kMaxRank) fail("{}: lookahead.lora_rank {} is outside [1, {}]", path, rank, kMaxRank);
  if (!(alpha > 0) || !std::isfinite(alpha))
    fail("{}: lookahead.lora_alpha {} is not a finite number > 0", path, alpha);
  const AdapterShape shape{int(count), int(rank), float(alpha)};
  a.n_lookahead = shape.n_lookahead;
  a.lora = LoraAdapter(base, shape.rank, shape.alpha);
  a.embd.resize(size_t(a.n_lookahead) * base.dim);
  read_tensor(file, "lookahead.embd", {uint64_t(base.dim), uint64_t(a.n_lookahead)}, a.embd.data());
  const uint64_t r = uint64_t(shape.rank);
  for (int l = 0; l < base.n_layers; ++l)
    for (LoraSite site : kAllLoraSites) {
      read_tensor(file, lora_tensor(l, site, 'a'), {uint64_t(a.lora.in(site)), r}, a.lora.a(l, site));
      read_tensor(file, lora_tensor(l, site, 'b'), {r, uint64_t(a.lora.out(site))}, a.lora.b(l, site));
    }
  const size_t expected = 1 + size_t(2) * kLoraSites * base.n_layers;
  if (file.tensors().size() != expected)
    fail("{}: {} tensors, expected {} (embeddings and A, B of 7 projections x {} layers)", path, file.tensors().size(),
         expected, base.n_layers);
  return a;
}

void LookaheadAdapter::save(const std::string& path) const {
  const int dim = int(embd.size() / n_lookahead);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string(kArchitecture));
  w.set("general.name", gguf::Value::of_string("kvslim LookaheadKV adapter"));
  w.set("lookahead.count", gguf::Value::of_u32(uint32_t(n_lookahead)));
  w.set("lookahead.lora_rank", gguf::Value::of_u32(uint32_t(lora.rank())));
  w.set("lookahead.lora_alpha", gguf::Value::of_f32(lora.alpha()));
  w.set("lookahead.base_fingerprint", gguf::Value::of_u64(base_fingerprint));
  const uint32_t f32 = uint32_t(gguf::TensorType::F32);
  w.add_tensor("lookahead.embd", f32, {uint64_t(dim), uint64_t(n_lookahead)}, f32_bytes(embd.data(), embd.size()));
  const uint64_t r = uint64_t(lora.rank());
  for (int l = 0; l < lora.n_layers(); ++l)
    for (LoraSite site : kAllLoraSites) {
      const uint64_t in = uint64_t(lora.in(site)), out = uint64_t(lora.out(site));
      w.add_tensor(lora_tensor(l, site, 'a'), f32, {in, r}, f32_bytes(lora.a(l, site), r * in));
      w.add_tensor(lora_tensor(l, site, 'b'), f32, {r, out}, f32_bytes(lora.b(l, site), out * r));
    }
  w.write(path);
}

std::string adapter_path_beside(const std::string& model_path) {
  std::filesystem::path p(model_path);
  p.replace_extension(".lookahead.gguf");
  return p.string();
}

std::string adapter_beside(const std::string& model_path) {
  const std::string path = adapter_path_beside(model_path);
  return std::filesystem::exists(path) ? path : "";
}

}  // namespace kvslim
