// Training-only retrieval tasks with many answers per sequence. An evaluation sample asks one
// question, so a 4K-token sample carries a handful of answer tokens: too little signal for a
// small model to learn to match a needle by its key among several (niah_multikey_1), to copy a
// 36-character UUID without a slip (niah_single_3) or to follow a chain of assignments (vt).
// These sequences put the evaluation tasks' own sentences (needles, questions, answer prefixes)
// many times into one haystack and ask about many of them, with the loss on every answer:
//
//   recall: N needles "One of the special magic numbers|uuids for KEY is: VALUE." with distinct
//           word keys (7-digit numbers, or UUIDs) in a varied or noise haystack; about half of
//           the keys are asked, one question after another, each with niah's question and answer
//           prefix and the value as the answer.
//   recall_uuids: recall with UUID values only, for the slip-free copying niah_single_3 needs
//           (plain recall draws UUIDs in 2 sequences of 5).
//   chains: C variable-tracking chains ("VAR A = 12345." then "VAR B = VAR A." ...) interleaved
//           in the noise haystack; every chain is asked with vt's question and answer prefix and
//           its five names as the answer.
//
// Like `induction`, they are training-only (no evaluation task reads them) and use the training
// seeds of the stream, so held-out evaluation samples are never seen.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "train/train_model.h"

namespace kvslim::train {

inline constexpr const char* kRecallTask = "recall";
inline constexpr const char* kRecallUuidsTask = "recall_uuids";
inline constexpr const char* kChainsTask = "chains";
inline constexpr int64_t kDenseMinTokens = 512;

bool is_dense_task(const std::string& task);

// The sequence (BOS when the tokenizer adds one, the text, EOS) of at most `length` tokens before
// the EOS; the loss is 1 on the answers and the EOS, prompt_weight elsewhere. Throws for a task
// that is not a dense one or a length below kDenseMinTokens.
TrainSequence dense_sequence(const std::string& task, uint64_t seed, int64_t length, const Tokenizer& tokenizer,
                             float prompt_weight);

// Its text, for training a tokenizer on what the model reads.
std::string dense_text(const std::string& task, uint64_t seed, int64_t length, const Tokenizer& tokenizer);

}  // namespace kvslim::train
