#include "python_press.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "press/scorer_press.h"

namespace kvslim::python {

namespace {

// The window's queries and attention rows, shared with the NumPy views handed to Python: a view
// kept past the call holds its buffer alive (the next prompt gets fresh buffers).
using SharedFloats = std::shared_ptr<std::vector<float>>;

// A read-only view of `shape` over buffer[offset..] with strides counted in floats.
py::array view_of(const SharedFloats& buffer, size_t offset, std::vector<py::ssize_t> shape,
                  std::vector<py::ssize_t> strides) {
  for (py::ssize_t& s : strides) s *= py::ssize_t(sizeof(float));
  py::capsule owner(new SharedFloats(buffer), [](void* p) { delete static_cast<SharedFloats*>(p); });
  py::array view(py::dtype::of<float>(), std::move(shape), std::move(strides), buffer->data() + offset, owner);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

struct PythonPressSettings {
  std::string name;
  int window = 32;              // the observation window: the last `window` prompt queries
  bool wants_attention = true;  // collect the window's attention rows
  bool scorer = true;           // ScorerPress (score) or Press (select)
};

class PythonPress final : public ScorerPress, private AttentionProbe {
 public:
  PythonPress(std::shared_ptr<PyHandle> handle, PythonPressSettings settings)
      : handle_(std::move(handle)), s_(std::move(settings)) {}

  AttentionProbe* prefill_probe() override { return this; }

  void begin(PressContext& ctx) override {
    const ModelConfig& c = ctx.config();
    n_heads_ = c.n_heads;
    head_dim_ = c.head_dim;
    n_keys_ = ctx.n_prompt();  // no head holds more than the history
    window_ = std::min<int64_t>(s_.window, n_keys_);
    window_start_ = n_keys_ - window_;
    queries_ = std::make_shared<std::vector<float>>(size_t(c.n_layers) * n_heads_ * window_ * head_dim_, 0.0f);
    attention_ = s_.wants_attention
                     ? std::make_shared<std::vector<float>>(size_t(c.n_layers) * n_heads_ * window_ * n_keys_, 0.0f)
                     : nullptr;
  }

  void end_prefill(PressContext& ctx) override {
    forget_layer();
    ScorerPress::end_prefill(ctx);
    forget_layer();
  }

  std::vector<float> score(PressContext& ctx, int layer, int kv_head) override {
    if (layer != layer_) ask_python(ctx, layer);
    const int64_t n = ctx.cache().head(layer, kv_head).size();
    if (!s_.scorer) return std::vector<float>(size_t(n), 0.0f);
    const std::vector<float>& row = scores_[size_t(kv_head)];
    return std::vector<float>(row.begin(), row.begin() + n);
  }

  std::vector<int32_t> select(PressContext& ctx, int layer, int kv_head, std::span<const float> scores,
                              int64_t budget) override {
    if (s_.scorer) return ScorerPress::select(ctx, layer, kv_head, scores, budget);
    const std::vector<int32_t>& kept = kept_[size_t(kv_head)];
    if (int64_t(kept.size()) > budget)
      throw py::value_error(fmt::format("{}.select() for layer {}: KV head {} keeps {} tokens, more than the budget {}",
                                        s_.name, layer, kv_head, kept.size(), budget));
    return kept;
  }

 private:
  void on_queries(int layer, const float* q, int n, int64_t first_position) override {
    for (int i = 0; i < n; ++i) {
      const int64_t w = first_position + i - window_start_;
      if (w < 0 || w >= window_) continue;
      for (int h = 0; h < n_heads_; ++h)
        std::memcpy(&(*queries_)[((size_t(layer) * n_heads_ + h) * window_ + w) * head_dim_],
                    q + (size_t(i) * n_heads_ + h) * head_dim_, sizeof(float) * head_dim_);
    }
  }

  void on_row(int layer, int q_head, int64_t query_position, const float* probs, int64_t n_visible) override {
    const int64_t w = query_position - window_start_;
    if (!attention_ || w < 0 || w >= window_) return;
    std::memcpy(&(*attention_)[((size_t(layer) * n_heads_ + q_head) * window_ + w) * n_keys_], probs,
                sizeof(float) * size_t(std::min(n_visible, n_keys_)));
  }

  void forget_layer() {
    layer_ = -1;
    scores_.clear();
    kept_.clear();
  }

  // Hands `layer` (before any of its heads is cut) to the Python object once; keeps its answer
  // per KV head.
  void ask_python(PressContext& ctx, int layer) {
    const PagedKvCache& cache = ctx.cache();
    const int n_kv = cache.n_kv_heads();
    const int64_t tokens = cache.n_tokens(layer);
    py::gil_scoped_acquire gil;
    // Keys and values are gathered as f32 (pages store f16 by default; heads of a later turn
    // may hold different counts: shorter heads are padded with zeros, their padding ignored).
    py::array_t<float> keys({py::ssize_t(n_kv), py::ssize_t(tokens), py::ssize_t(head_dim_)});
    py::array_t<float> values({py::ssize_t(n_kv), py::ssize_t(tokens), py::ssize_t(head_dim_)});
    float* k = keys.mutable_data();
    float* v = values.mutable_data();
    std::fill_n(k, keys.size(), 0.0f);
    std::fill_n(v, values.size(), 0.0f);
    std::vector<float> row(static_cast<size_t>(head_dim_), 0.0f);
    for (int h = 0; h < n_kv; ++h) {
      const HeadCache& head = cache.head(layer, h);
      for (int64_t i = 0; i < head.size(); ++i) {
        const size_t at = (size_t(h) * tokens + i) * head_dim_;
        std::memcpy(k + at, head.key_f32(i, row.data()), sizeof(float) * head_dim_);
        std::memcpy(v + at, head.value_f32(i, row.data()), sizeof(float) * head_dim_);
      }
    }
    const size_t per_layer_q = size_t(n_heads_) * window_ * head_dim_;
    py::array queries =
        view_of(queries_, layer * per_layer_q, {n_heads_, window_, head_dim_}, {window_ * head_dim_, head_dim_, 1});
    py::object attention = py::none();
    if (attention_)
      attention = view_of(attention_, size_t(layer) * n_heads_ * window_ * n_keys_, {n_heads_, window_, tokens},
                          {window_ * n_keys_, n_keys_, 1});
    const py::object& press = handle_->object;
    if (s_.scorer) {
      take_scores(cache, layer, press.attr("score")(layer, keys, values, queries, attention));
    } else {
      take_kept(cache, layer, press.attr("select")(layer, keys, values, queries, attention, ctx.budget()));
    }
    layer_ = layer;
  }

  void take_scores(const PagedKvCache& cache, int layer, const py::object& result) {
    using Scores = py::array_t<float, py::array::c_style | py::array::forcecast>;
    Scores s = Scores::ensure(result);
    if (!s)
      throw py::type_error(fmt::format("{}.score() for layer {} returned {}, not an array of numbers", s_.name, layer,
                                       std::string(py::str(py::type::of(result)))));
    const int n_kv = cache.n_kv_heads();
    const int64_t tokens = cache.n_tokens(layer);
    if (s.ndim() != 2 || s.shape(0) != n_kv || s.shape(1) != tokens) {
      std::vector<std::string> dims;
      for (py::ssize_t i = 0; i < s.ndim(); ++i) dims.push_back(std::to_string(s.shape(i)));
      throw py::value_error(
          fmt::format("{}.score() for layer {} returned shape ({}): expected ({}, {}), (kv_heads, tokens)", s_.name,
                      layer, fmt::join(dims, ", "), n_kv, tokens));
    }
    scores_.assign(size_t(n_kv), {});
    for (int h = 0; h < n_kv; ++h) {
      const float* from = s.data(h, 0);
      const int64_t n = cache.head(layer, h).size();
      for (int64_t i = 0; i < n; ++i)
        if (std::isnan(from[i]))
          throw py::value_error(
              fmt::format("{}.score() for layer {} returned NaN (KV head {}, token {})", s_.name, layer, h, i));
      scores_[size_t(h)].assign(from, from + tokens);
    }
  }

  void take_kept(const PagedKvCache& cache, int layer, const py::object& result) {
    const int n_kv = cache.n_kv_heads();
    const std::string where = fmt::format("{}.select() for layer {}", s_.name, layer);
    if (!py::isinstance<py::sequence>(result) || py::len(result) != size_t(n_kv))
      throw py::value_error(fmt::format("{} must return one sequence of kept indices per KV head ({})", where, n_kv));
    using Indices = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
    const py::sequence heads = result;
    kept_.assign(size_t(n_kv), {});
    for (int h = 0; h < n_kv; ++h) {
      Indices idx = Indices::ensure(heads[size_t(h)]);
      if (!idx || idx.ndim() != 1)
        throw py::value_error(fmt::format("{}: KV head {}: expected a 1-D sequence of indices", where, h));
      const int64_t n = cache.head(layer, h).size();
      std::vector<int32_t>& kept = kept_[size_t(h)];
      for (py::ssize_t j = 0; j < idx.shape(0); ++j) {
        const int64_t i = idx.at(j);
        if (i < 0 || i >= n || (j > 0 && i <= kept.back()))
          throw py::value_error(fmt::format("{}: KV head {}: index {} (#{}) is out of order or outside the {} tokens",
                                            where, h, i, j, n));
        kept.push_back(int32_t(i));
      }
    }
  }

  std::shared_ptr<PyHandle> handle_;
  PythonPressSettings s_;
  int n_heads_ = 0, head_dim_ = 0;
  int64_t n_keys_ = 0, window_ = 0, window_start_ = 0;
  SharedFloats queries_, attention_;        // [layer][q head][window][head_dim] / [..][window][n_keys]
  int layer_ = -1;                          // the layer whose answer is held
  std::vector<std::vector<float>> scores_;  // [kv head][tokens]
  std::vector<std::vector<int32_t>> kept_;  // [kv head]
};

}  // namespace

std::shared_ptr<const PressInfo> python_press_info(const py::object& press) {
  const std::string kind = py::hasattr(press, "_kvslim_press_kind") ? py::str(press.attr("_kvslim_press_kind")) : "";
  if (kind != "scorer" && kind != "select")
    throw py::type_error(
        fmt::format("press= takes a method name or a kvslim.Press / kvslim.ScorerPress instance, not {}",
                    std::string(py::str(py::type::of(press)))));
  PythonPressSettings s;
  s.name = "python:" + std::string(py::str(py::type::of(press).attr("__name__")));
  s.scorer = kind == "scorer";
  const py::object window = press.attr("window");
  if (!py::isinstance<py::int_>(window) || window.cast<int64_t>() < 1 || window.cast<int64_t>() > (1 << 20))
    throw py::value_error(
        fmt::format("{}: window must be an integer in [1, 1048576] (got {})", s.name, std::string(py::repr(window))));
  s.window = window.cast<int>();
  s.wants_attention = py::bool_(press.attr("wants_attention"));
  auto handle = std::make_shared<PyHandle>(press);
  auto info = std::make_shared<PressInfo>();
  info->name = s.name;
  info->description = "a press written in Python";
  info->make = [handle, s](const PressOptions&) { return std::make_unique<PythonPress>(handle, s); };
  info->can = {.block_eviction = BlockEviction::None,
               .budget_rule = BudgetRule::PerHead,
               .adakv_wraps = false,
               .multi_turn = MultiTurnRule::SelectAgain};
  return info;
}

}  // namespace kvslim::python
