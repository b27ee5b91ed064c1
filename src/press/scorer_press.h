// The common shape of prefill-time methods (as kvpress's ScorerPress): score every cached prompt
// token of each (layer, KV head) once the prompt is cached, keep the best `budget`. Subclasses
// write score() and, when they force sinks or windows, select().
#pragma once

#include <span>
#include <vector>

#include "press/press.h"

namespace kvslim {

class ScorerPress : public Press {
 public:
  // One score per cached token of (layer, kv_head); higher means keep.
  virtual std::vector<float> score(PressContext& ctx, int layer, int kv_head) = 0;
  // Which tokens to keep given the scores; default: the top `budget`.
  virtual std::vector<int32_t> select(PressContext& ctx, int layer, int kv_head, std::span<const float> scores,
                                      int64_t budget);

  // Heads holding more than the budget are scored and evicted; budget >= prompt is a no-op.
  void end_prefill(PressContext& ctx) override;
};

}  // namespace kvslim
