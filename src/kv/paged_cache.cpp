#include "kv/paged_cache.h"

#include <algorithm>
#include <atomic>

#include "util/error.h"

namespace kvslim {

namespace {

// Turns the kernel's (group member, block query) rows into the probe's (query head, original
// position) rows.
class ProbeRows final : public SoftmaxRowObserver {
 public:
  ProbeRows(AttentionProbe& probe, int layer, int first_q_head, const HeadCache& head, int64_t n_q)
      : probe_(probe), layer_(layer), first_q_head_(first_q_head), head_(head), first_query_(head.size() - n_q) {}
  void on_row(int g, int64_t i, const float* probs, int64_t n_visible) override {
    probe_.on_row(layer_, first_q_head_ + g, head_.position(first_query_ + i), probs, n_visible);
  }

 private:
  AttentionProbe& probe_;
  int layer_, first_q_head_;
  const HeadCache& head_;
  int64_t first_query_;
};

}  // namespace

namespace {

const KvShape& validated(const KvShape& shape) {
  validate_kv_shape(shape);
  return shape;
}

}  // namespace

PagedKvCache::PagedKvCache(const KvShape& shape, int64_t capacity, int page_tokens)
    : n_layers_(validated(shape).n_layers),
      n_heads_(shape.n_heads),
      n_kv_heads_(shape.n_kv_heads),
      head_dim_(shape.head_dim),
      windows_(shape.layer_window),
      sinks_(shape.layer_sinks),
      capacity_(capacity),
      pool_(shape.head_dim, page_tokens, shape.key_type, shape.value_type) {
  if (capacity < 1) fail("KV cache: capacity must be >= 1 token (got {})", capacity);
  heads_.resize(size_t(n_layers_) * n_kv_heads_);
  for (int l = 0; l < n_layers_; ++l)
    if (!is_local(l)) global_layers_.push_back(l);
  selected_.resize(size_t(n_kv_heads_));
}

PagedKvCache::~PagedKvCache() {
  for (HeadCache& h : heads_) h.clear(pool_);
}

void PagedKvCache::append(int layer, const float* k, const float* v, int n, const int64_t* positions) {
  for (int h = 0; h < n_kv_heads_; ++h)
    if (head(layer, h).size() + n > capacity_)
      fail("KV cache full: layer {} KV head {} holds {} tokens, + {} exceeds the context of {}", layer, h,
           head(layer, h).size(), n, capacity_);
  const int64_t kv_dim = int64_t(n_kv_heads_) * head_dim_;
  for (int h = 0; h < n_kv_heads_; ++h) {
    HeadCache& hc = head(layer, h);
    for (int t = 0; t < n; ++t)
      hc.append(k + t * kv_dim + h * head_dim_, v + t * kv_dim + h * head_dim_, positions[t], pool_);
  }
}

void PagedKvCache::attend(int layer, const float* q, int n, float* out, ThreadPool& pool) {
  const int group = n_heads_ / n_kv_heads_;
  const int64_t q_dim = int64_t(n_heads_) * head_dim_;
  for (int h = 0; h < n_kv_heads_; ++h)
    if (head(layer, h).size() < n)
      fail("KV attend: layer {} KV head {} holds {} tokens, fewer than the block of {}", layer, h,
           head(layer, h).size(), n);
  if (scratch_.size() < size_t(pool.size())) {
    // Sized once for the largest query tile (or group) over a full head, so decode never
    // allocates.
    scratch_.resize(size_t(pool.size()));
    // The prefill products read a chunk of pages at a time as f32 rows.
    for (auto& s : scratch_) {
      s.scores.resize(size_t(attention_scores_size(group, capacity_)));
      s.rows.resize(size_t(attention_key_chunk(pool_.page_tokens())) * head_dim_);
      s.queries.resize(size_t(kAttentionQueryTile) * head_dim_);
      s.tile_out.resize(size_t(kAttentionQueryTile) * head_dim_);
    }
  }

  const bool local = is_local(layer);
  bool sparse = false;
  if (n == 1 && selector_ != nullptr && !local) {
    sparse = selector_->select(layer, q, *this, selected_, pool);
    if (sparse) {
      if (selected_.size() != size_t(n_kv_heads_))
        fail("sparse selector: {} index lists for {} KV heads", selected_.size(), n_kv_heads_);
      for (int h = 0; h < n_kv_heads_; ++h) {
        const auto& sel = selected_[size_t(h)];
        const int64_t size = head(layer, h).size();
        for (size_t j = 0; j < sel.size(); ++j)
          if (sel[j] < 0 || sel[j] >= size || (j > 0 && sel[j] <= sel[j - 1]))
            fail("sparse selector: layer {} KV head {}: index {} (#{}) is out of order or outside the {} tokens", layer,
                 h, sel[j], j, size);
      }
    }
  }

  AttentionProbe* probe = local ? nullptr : probe_;
  if (probe != nullptr && !sparse) {
    const HeadCache& first = head(layer, 0);
    probe->on_queries(layer, q, n, first.position(first.size() - n));
  }

  // Work units, claimed dynamically so that heads of different sizes (and a busy core) balance:
  // a KV head with its query heads (each key row read, and in prefill packed, once for all of
  // them), split into sub-groups when there are too few KV heads for the threads. Decode wants a
  // unit per thread. Prefill wants about 8: with a whole group per unit (8 units on 2 threads at
  // Llama-3.2-1B's shape) the thread that finished first idled for up to a unit's time, a fifth
  // of the layer's attention in kv_attention's microbenchmark, more than sharing four heads' keys
  // instead of two saves.
  const int per_thread = n == 1 ? 1 : 8;
  const int splits = std::clamp((per_thread * pool.size() + n_kv_heads_ - 1) / n_kv_heads_, 1, group);
  const int units = n_kv_heads_ * splits;
  std::atomic<int> next{0};
  pool.run_fn([&](int thread, int) {
    AttentionScratch& scratch = scratch_[size_t(thread)];
    for (int u = next.fetch_add(1, std::memory_order_relaxed); u < units;
         u = next.fetch_add(1, std::memory_order_relaxed)) {
      const int kv_head = u / splits, part = u % splits;
      const int g0 = group * part / splits, g1 = group * (part + 1) / splits;
      const int first_q_head = kv_head * group + g0;
      const HeadCache& hc = head(layer, kv_head);
      const float* layer_sinks = sinks(layer);
      const PagedKv kv{hc, head_dim_, pool_.page_tokens(), window(layer),
                       layer_sinks != nullptr ? layer_sinks + first_q_head : nullptr};
      const float* qh = q + int64_t(first_q_head) * head_dim_;
      float* oh = out + int64_t(first_q_head) * head_dim_;
      if (sparse) {
        attend_sparse(kv, selected_[size_t(kv_head)], qh, g1 - g0, oh, scratch);
      } else if (probe != nullptr) {
        ProbeRows rows(*probe, layer, first_q_head, hc, n);
        attend_dense(kv, qh, q_dim, g1 - g0, n, oh, q_dim, scratch, &rows);
      } else {
        attend_dense(kv, qh, q_dim, g1 - g0, n, oh, q_dim, scratch);
      }
    }
  });
}

void PagedKvCache::slide_windows(int64_t next_position) {
  for (int l = 0; l < n_layers_; ++l) {
    if (!is_local(l)) continue;
    for (int h = 0; h < n_kv_heads_; ++h) {
      HeadCache& hc = head(l, h);
      hc.drop_front(hc.first_after(next_position - window(l)), pool_);
    }
  }
}

int64_t PagedKvCache::n_tokens(int layer) const {
  int64_t most = 0;
  for (int h = 0; h < n_kv_heads_; ++h) most = std::max(most, head(layer, h).size());
  return most;
}

int64_t PagedKvCache::total_tokens() const {
  int64_t total = 0;
  for (const HeadCache& h : heads_) total += h.size();
  return total;
}

}  // namespace kvslim
