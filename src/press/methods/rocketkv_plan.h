// RocketKV's budget split (RocketKV §3.2 and §3.5, as the authors' released code computes it):
// a per-KV-head token-traffic budget B for each decode step is divided between stage 1 (prompt
// tokens kept by SnapKV++) and stage 2 (page size, query channels and tokens read by hybrid
// attention), and the result's storage and traffic are measured in token-equivalents: one token
// is its key and value, 2*head_dim floats.
#pragma once

#include <cstdint>

namespace kvslim {

// Released: stage 1 takes c^α of the compression c = S/B, α = min(0.2 + 0.06*log2 c, 0.8).
// Even: α = 1/2, the paper's even split (√c to each stage; stage 2 then gives about c^(1/4) to
// pages and to channels), as the released code's fixed-α variant computes it.
enum class RocketKvSplit { Released, Even };

struct RocketKvPlan {
  int64_t prompt_budget = 0;  // P: prompt tokens stage 1 keeps per KV head
  int page = 1;               // p: tokens per page of stage 2
  int channels = 1;           // r: query channels of stage 2's approximate scores
  int64_t top_k = 1;          // k: tokens read exactly per decode step, the newest included

  // K and V of `stored` tokens plus, per page of the `paged` tokens stage 2 ranks, the min and
  // max of K (2*head_dim floats: one token-equivalent).
  double storage_tokens(int64_t stored, int64_t paged) const;
  // One decode step over `paged` tokens: r channels of one page summary (max or min) per page,
  // r/(2*head_dim) token-equivalents each, plus the min(k, paged) tokens read exactly.
  double traffic_tokens(int64_t paged, int head_dim) const;
};

// S = n_prompt + max_new, c = max(1, S/B), N_cap = max(floor(S / c^α), min(2*max_new, S)),
// P = N_cap - max_new (at least 1), c2 = max(1, N_cap/B), p = ceil(sqrt(c2)) (1 if that
// exceeds c2), r = floor(head_dim*p/c2) clamped to [1, head_dim], k = floor(B/2) (at least 1).
RocketKvPlan rocketkv_plan(int64_t n_prompt, int64_t max_new, int64_t budget, int head_dim, RocketKvSplit split);

}  // namespace kvslim
