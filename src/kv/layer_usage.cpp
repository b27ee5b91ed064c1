#include "kv/layer_usage.h"

namespace kvslim {

std::vector<LayerUsage> layer_usage(const PagedKvCache& cache) {
  std::vector<LayerUsage> usage;
  for (int l = 0; l < cache.n_layers(); ++l) {
    LayerUsage u{l, cache.is_local(l), cache.window(l), 0, 0};
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      const HeadCache& head = cache.head(l, h);
      u.tokens += head.size();
      u.bytes += uint64_t(head.pages().size()) * cache.pool().page_bytes();
    }
    usage.push_back(u);
  }
  return usage;
}

}  // namespace kvslim
