// One training example of LookaheadKV, computed by the inference engine with the full cache: the
// base model prefills the prompt, then reads its own response (teacher forcing) while a probe sums
// each response query's attention on the prompt tokens; the result is normalised per (layer,
// query head) to sum 1 over the prompt (LookaheadKV §2, "ground-truth importance"). The prompt's
// KV is kept for the objective, which treats it as a constant.
#pragma once

#include <vector>

#include "lookahead/objective.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace kvslim {

// Throws for an empty prompt or response. With window_votes, also sums there the attention of
// the last `window` prompt queries on the prompt ([layer][query head][n]): SnapKV's votes, the
// baseline a trained adapter should beat.
PromptTarget<float> prompt_target(const Model& model, ThreadPool& pool, const std::vector<int32_t>& prompt,
                                  const std::vector<int32_t>& response, std::vector<float>* window_votes = nullptr,
                                  int window = 32);

}  // namespace kvslim
