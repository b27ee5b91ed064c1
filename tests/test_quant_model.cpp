// Models whose tensors mix block-quantised types (as llama-quantize writes them: token embedding
// and output in another type than the blocks), and truncated quantised tensor data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "model/forward.h"
#include "model/model.h"
#include "kv/paged_cache.h"
#include "test_models.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace kvslim {
namespace {

using testing::make_model;
using testing::temp_path;
using testing::TinyModel;

// Copies `src` to `dst`, re-quantising each 2-D tensor to the type `pick` chooses for its name.
template <class Pick>
void requantize(const std::string& src, const std::string& dst, Pick&& pick) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& e : f.metadata()) w.set(e.key, e.value);
  for (const auto& t : f.tensors()) {
    const DType from = dtype_from_ggml(t.type);
    const int64_t cols = int64_t(t.dims[0]), rows = t.dims.size() > 1 ? int64_t(t.dims[1]) : 1;
    const DType to = t.dims.size() > 1 ? pick(t.name) : from;
    std::vector<float> row(cols);
    std::vector<uint8_t> bytes(row_bytes(to, cols) * rows);
    for (int64_t r = 0; r < rows; ++r) {
      convert_to_f32(from, f.tensor_data(t) + r * row_bytes(from, cols), row.data(), cols);
      convert_from_f32(row.data(), to, bytes.data() + r * row_bytes(to, cols), cols);
    }
    w.add_tensor(t.name, ggml_type_id(to), t.dims, std::move(bytes));
  }
  w.write(dst);
}

TEST(QuantModel, MixedTypesPerTensorLoadAndRunLikeTheirDequantisedCopy) {
  TinyModel tm;
  tm.type = DType::F32;
  tm.dim = 256;
  tm.ffn = 512;
  const std::string f32_path = make_model(tm);
  const std::string mixed = temp_path("mixed-types.gguf");
  requantize(f32_path, mixed, [](const std::string& name) {
    if (name == "token_embd.weight") return DType::Q6_K;
    if (name == "output.weight") return DType::Q8_0;
    if (name.find("ffn_down") != std::string::npos) return DType::Q5_K;
    if (name.find("attn_v") != std::string::npos) return DType::Q4_1;
    return DType::Q4_K;
  });
  const auto model = Model::load(mixed);
  EXPECT_EQ(model->token_embedding().type, DType::Q6_K);
  EXPECT_EQ(model->output().type, DType::Q8_0);
  EXPECT_EQ(model->layers()[0].w_down.type, DType::Q5_K);
  EXPECT_EQ(model->layers()[1].wv.type, DType::Q4_1);
  EXPECT_EQ(model->layers()[1].wq.type, DType::Q4_K);

  // The same weights dequantised back to f32 give nearly the same logits (the only difference is
  // the quantised activations of the integer kernels: a few percent on this random model).
  const std::string back = temp_path("mixed-types-f32.gguf");
  requantize(mixed, back, [](const std::string&) { return DType::F32; });
  const auto ref = Model::load(back);
  ThreadPool pool(2);
  std::vector<int32_t> tokens = {1, 50, 99, 7, 200, 31};
  auto logits = [&](const Model& m) {
    PagedKvCache cache(kv_shape(m.config()), 64);
    Forward fwd(m, 8);
    const float* l = fwd.run(tokens.data(), int(tokens.size()), 0, cache, pool, false);
    return std::vector<float>(l, l + m.config().n_vocab);
  };
  const auto a = logits(*model), b = logits(*ref);
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  EXPECT_LT(err / scale, 0.08);
  EXPECT_GT(scale, 0.0);
}

TEST(QuantModel, TruncatedQuantisedTensorDataIsAClearError) {
  TinyModel tm;
  tm.type = DType::Q4_K;
  tm.dim = 256;
  tm.ffn = 512;
  const std::string path = make_model(tm);
  const std::string cut = temp_path("truncated-q4k.gguf");
  std::filesystem::copy_file(path, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, std::filesystem::file_size(path) - 100);
  try {
    (void)Model::load(cut);
    FAIL() << "a truncated file loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
  }
}

TEST(QuantModel, RowsThatAreNotWholeBlocksAreRefusedWhenLoading) {
  // dim 64 is fine for q4_0 (blocks of 32) but not for K-quants (256): writing such a q4_k model
  // is refused, and so is loading one whose tensors claim it.
  TinyModel tm;
  tm.type = DType::F32;
  const std::string f32_path = make_model(tm);
  const std::string bad = temp_path("rows-not-whole-blocks.gguf");
  RandomModelSpec spec;
  spec.type = DType::Q4_K;
  spec.config.dim = 64;
  spec.config.n_heads = 4;
  spec.config.n_kv_heads = 2;
  spec.config.ffn_dim = 96;
  spec.config.n_layers = 1;
  EXPECT_THROW(write_random_model(spec, testing::tiny_vocab(), bad), Error);
  (void)f32_path;
}

}  // namespace
}  // namespace kvslim
