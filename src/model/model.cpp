#include "model/model.h"

#include <fmt/ranges.h>

#include <filesystem>

#include "model/weight_residency.h"
#include "util/error.h"

namespace kvslim {

namespace {

// Looks up a tensor and checks its shape (ggml order: dims[0] is contiguous).
class TensorLoader {
 public:
  explicit TensorLoader(const gguf::File& file) : file_(file) {}

  const gguf::TensorInfo* find(const std::string& name) const { return file_.find_tensor(name); }

  const gguf::TensorInfo& require(const std::string& name, std::vector<uint64_t> dims) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t) fail("{}: missing tensor '{}'", file_.path(), name);
    if (t->dims != dims)
      fail("{}: tensor '{}' has shape [{}], expected [{}]", file_.path(), name, fmt::join(t->dims, ", "),
           fmt::join(dims, ", "));
    return *t;
  }

  // A matrix of `rows` outputs by `cols` inputs, in its stored type.
  WeightView matrix(const std::string& name, int64_t cols, int64_t rows) const {
    return view(require(name, {uint64_t(cols), uint64_t(rows)}), rows, cols);
  }

  WeightView view(const gguf::TensorInfo& t, int64_t rows, int64_t cols) const {
    DType type;
    try {
      type = dtype_from_ggml(t.type);
    } catch (const Error& e) {
      fail("{}: tensor '{}': {}", file_.path(), t.name, e.what());
    }
    if (cols % dtype_block_size(type) != 0)
      fail("{}: tensor '{}' is {} but its rows of {} values are not whole blocks of {}", file_.path(), t.name,
           dtype_name(type), cols, dtype_block_size(type));
    return WeightView{type, file_.tensor_data(t), rows, cols};
  }

  // A small vector (norm weight, bias, rope factors) converted to f32.
  std::vector<float> vector(const std::string& name, int64_t n) const {
    const WeightView w = view(require(name, {uint64_t(n)}), 1, n);
    std::vector<float> out(n);
    convert_to_f32(w.type, w.data, out.data(), n);
    return out;
  }

 private:
  const gguf::File& file_;
};

// Rows [first, first + count) of a matrix: the parts of a fused tensor, views into its rows.
WeightView row_slice(const WeightView& w, int64_t first, int64_t count) {
  return WeightView{w.type, w.row(first), count, w.cols};
}

// Q, K and V: separate tensors, or one attn_qkv of q_dim + 2 kv_dim rows (Phi-3) split in that order.
void load_qkv(const TensorLoader& loader, const std::string& p, const ModelConfig& c, LayerWeights& w) {
  if (!loader.find(p + "attn_qkv.weight")) {
    w.wq = loader.matrix(p + "attn_q.weight", c.dim, c.q_dim());
    w.wk = loader.matrix(p + "attn_k.weight", c.dim, c.kv_dim());
    w.wv = loader.matrix(p + "attn_v.weight", c.dim, c.kv_dim());
    return;
  }
  const WeightView qkv = loader.matrix(p + "attn_qkv.weight", c.dim, c.q_dim() + 2 * c.kv_dim());
  w.wq = row_slice(qkv, 0, c.q_dim());
  w.wk = row_slice(qkv, c.q_dim(), c.kv_dim());
  w.wv = row_slice(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
}

// Gate and up: separate tensors, or (Phi-3) one ffn_up of 2 ffn rows, the gate first, as
// llama.cpp's swiglu of the fused product takes them.
void load_gate_up(const TensorLoader& loader, const std::string& p, const ModelConfig& c, LayerWeights& w) {
  if (!c.fused_projections()) {
    w.w_gate = loader.matrix(p + "ffn_gate.weight", c.dim, c.ffn_dim);
    w.w_up = loader.matrix(p + "ffn_up.weight", c.dim, c.ffn_dim);
    return;
  }
  const WeightView gate_up = loader.matrix(p + "ffn_up.weight", c.dim, 2 * int64_t(c.ffn_dim));
  w.w_gate = row_slice(gate_up, 0, c.ffn_dim);
  w.w_up = row_slice(gate_up, c.ffn_dim, c.ffn_dim);
}

// The experts of a 3-D ffn_*_exps tensor ([cols, rows, n_experts] in ggml order): expert e's
// matrix is the e-th contiguous slice of rows x cols, viewed in place.
std::vector<WeightView> expert_views(const TensorLoader& loader, const std::string& name, int64_t cols, int64_t rows,
                                     int n_experts) {
  const gguf::TensorInfo& t = loader.require(name, {uint64_t(cols), uint64_t(rows), uint64_t(n_experts)});
  const WeightView all = loader.view(t, rows * n_experts, cols);
  std::vector<WeightView> experts;
  for (int e = 0; e < n_experts; ++e) experts.push_back(row_slice(all, int64_t(e) * rows, rows));
  return experts;
}

// A bias per expert ([width, n_experts]) as f32, or empty when the file has none.
// Absent and not `required`: none.
std::vector<float> expert_bias(const TensorLoader& loader, const std::string& name, int64_t width, int n_experts,
                               bool required) {
  if (!required && !loader.find(name)) return {};
  const gguf::TensorInfo& t = loader.require(name, {uint64_t(width), uint64_t(n_experts)});
  const WeightView w = loader.view(t, n_experts, width);
  std::vector<float> out(size_t(width) * n_experts);
  convert_to_f32(w.type, w.data, out.data(), int64_t(out.size()));
  return out;
}

// The router (ffn_gate_inp) and the experts of a mixture-of-experts layer, with their optional biases.
MoeWeights load_moe(const TensorLoader& loader, const std::string& p, const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  MoeWeights w;
  const bool biases = c.is_gptoss();  // gpt-oss's router and experts always have them (llama.cpp requires them)
  w.router = loader.matrix(p + "ffn_gate_inp.weight", c.dim, m.n_experts);
  if (biases || loader.find(p + "ffn_gate_inp.bias"))
    w.router_bias = loader.vector(p + "ffn_gate_inp.bias", m.n_experts);
  w.gate = expert_views(loader, p + "ffn_gate_exps.weight", c.dim, m.expert_ffn_dim, m.n_experts);
  w.up = expert_views(loader, p + "ffn_up_exps.weight", c.dim, m.expert_ffn_dim, m.n_experts);
  w.down = expert_views(loader, p + "ffn_down_exps.weight", m.expert_ffn_dim, c.dim, m.n_experts);
  w.gate_bias = expert_bias(loader, p + "ffn_gate_exps.bias", m.expert_ffn_dim, m.n_experts, biases);
  w.up_bias = expert_bias(loader, p + "ffn_up_exps.bias", m.expert_ffn_dim, m.n_experts, biases);
  w.down_bias = expert_bias(loader, p + "ffn_down_exps.bias", c.dim, m.n_experts, biases);
  return w;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
  // A path that cannot be sized fails in File::open, with its reason.
  std::error_code size_error;
  const uint64_t bytes = std::filesystem::file_size(path, size_error);
  const gguf::Residency residency = size_error ? gguf::Residency::Mapped : weight_residency(bytes);
  std::unique_ptr<Model> model(new Model(gguf::File::open(path, residency)));
  Model& m = *model;
  m.config_ = ModelConfig::from_gguf(m.file_);
  ModelConfig& c = m.config_;
  const TensorLoader loader(m.file_);

  const gguf::TensorInfo* embd = loader.find("token_embd.weight");
  if (!embd) fail("{}: missing tensor 'token_embd.weight'", path);
  if (embd->dims.size() != 2 || embd->dims[0] != uint64_t(c.dim) || embd->dims[1] == 0 || embd->dims[1] > (1u << 24))
    fail("{}: tensor 'token_embd.weight' must have shape [{}, n_vocab]", path, c.dim);
  c.n_vocab = static_cast<int>(embd->dims[1]);
  m.token_embd_ = loader.view(*embd, c.n_vocab, c.dim);
  m.output_norm_ = loader.vector("output_norm.weight", c.dim);
  m.output_tied_ = loader.find("output.weight") == nullptr;
  m.output_ = m.output_tied_ ? m.token_embd_ : loader.matrix("output.weight", c.dim, c.n_vocab);
  if (loader.find("rope_freqs.weight")) m.rope_freqs_ = loader.vector("rope_freqs.weight", c.n_rot / 2);
  // Phi-3's LongRoPE factors come in pairs; a long-context file (original context below the
  // trained one) cannot run without them.
  if (loader.find("rope_factors_long.weight") || loader.find("rope_factors_short.weight")) {
    m.rope_factors_long_ = loader.vector("rope_factors_long.weight", c.n_rot / 2);
    m.rope_factors_short_ = loader.vector("rope_factors_short.weight", c.n_rot / 2);
  } else if (c.arch == Arch::Phi3 && c.rope_original_context < c.context_length) {
    fail("{}: missing tensor 'rope_factors_long.weight' (rope.scaling.original_context_length {} < context_length {})",
         path, c.rope_original_context, c.context_length);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights w;
    w.attn_norm = loader.vector(p + "attn_norm.weight", c.dim);
    load_qkv(loader, p, c, w);
    w.wo = loader.matrix(p + "attn_output.weight", c.q_dim(), c.dim);
    if (c.has_qkv_bias()) {
      w.bq = loader.vector(p + "attn_q.bias", c.q_dim());
      w.bk = loader.vector(p + "attn_k.bias", c.kv_dim());
      w.bv = loader.vector(p + "attn_v.bias", c.kv_dim());
    }
    if (c.is_gptoss()) {
      w.bo = loader.vector(p + "attn_output.bias", c.dim);
      w.attn_sinks = loader.vector(p + "attn_sinks.weight", c.n_heads);
      // llama.cpp's attn_post_norm, applied to the residual stream before the FFN: the role
      // ffn_norm has in the llama family.
      w.ffn_norm = loader.vector(p + "post_attention_norm.weight", c.dim);
    }
    if (c.has_qk_norm()) {
      w.q_norm = loader.vector(p + "attn_q_norm.weight", c.head_dim);
      w.k_norm = loader.vector(p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.is_gemma3()) {
      w.post_attn_norm = loader.vector(p + "post_attention_norm.weight", c.dim);
      w.post_ffn_norm = loader.vector(p + "post_ffw_norm.weight", c.dim);
    }
    if (!c.is_gptoss()) w.ffn_norm = loader.vector(p + "ffn_norm.weight", c.dim);  // gpt-oss's: above
    if (c.is_moe()) {
      w.moe = load_moe(loader, p, c);
    } else {
      load_gate_up(loader, p, c, w);
      w.w_down = loader.matrix(p + "ffn_down.weight", c.ffn_dim, c.dim);
    }
    m.layers_.push_back(std::move(w));
  }
  m.tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(m.file_));
  if (m.tokenizer_->n_vocab() > c.n_vocab)
    fail("{}: tokenizer has {} tokens but token_embd.weight only {} rows", path, m.tokenizer_->n_vocab(), c.n_vocab);
  return model;
}

const std::vector<float>& Model::rope_factors(int64_t n_ctx) const {
  if (!rope_freqs_.empty() || rope_factors_long_.empty()) return rope_freqs_;
  const int64_t ctx = n_ctx > 0 ? n_ctx : config_.context_length;
  return ctx > config_.rope_original_context ? rope_factors_long_ : rope_factors_short_;
}

KvShape kv_shape(const Model& model, DType key_type, DType value_type) {
  KvShape shape = kv_shape(model.config(), key_type, value_type);
  for (const LayerWeights& w : model.layers())
    if (!w.attn_sinks.empty()) {
      shape.layer_sinks.resize(model.layers().size());
      break;
    }
  if (!shape.layer_sinks.empty())
    for (size_t l = 0; l < model.layers().size(); ++l) shape.layer_sinks[l] = model.layers()[l].attn_sinks;
  return shape;
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for (const auto& t : file_.tensors()) total += t.n_bytes;
  return total;
}

uint64_t Model::active_weight_bytes_per_token() const {
  uint64_t total = 0;
  for (const auto& t : file_.tensors()) total += t.n_bytes;
  // token_embd: one row, unless it is also the output matrix (then it is read whole).
  if (!output_tied_)
    total -= file_.find_tensor("token_embd.weight")->n_bytes - row_bytes(token_embd_.type, token_embd_.cols);
  if (!config_.is_moe()) return total;
  const int unused = config_.moe.n_experts - config_.moe.n_experts_used;
  for (const LayerWeights& l : layers_) {
    const auto& m = l.moe;
    total -= uint64_t(unused) * (row_bytes(m.gate[0].type, m.gate[0].cols) * m.gate[0].rows +
                                 row_bytes(m.up[0].type, m.up[0].cols) * m.up[0].rows +
                                 row_bytes(m.down[0].type, m.down[0].cols) * m.down[0].rows);
  }
  return total;
}

}  // namespace kvslim
