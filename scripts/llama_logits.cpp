// llama.cpp's logits and greedy tokens for given token ids: the reference side of
// scripts/parity.sh and of tests/data/llama-cpp-logits.txt. Built by parity.sh against an
// existing llama.cpp build (libllama and its headers); not part of kvslim's build.
//
//   llama_logits MODEL --tokens 1,2,3 [--positions 0,2] [--greedy N] [--ctx N]
//   llama_logits MODEL --prompt TEXT ...   (tokenized by llama.cpp, BOS as the vocabulary says)
//
// Prints `prompt ID...` (with --prompt), `logits POS v0 v1 ...` (every vocabulary entry, %.9g) for each requested
// position of the prompt, then `greedy t1 ... tN`: argmax decoding after the prompt, no stop at EOS. The KV cache is
// f32 and flash attention is off, so only llama.cpp's own arithmetic differs from an exact forward pass.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<int> parse_ints(const char* text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

void quiet(ggml_log_level, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL --tokens 1,2,3|--prompt TEXT [--positions 0,2] [--greedy N] [--ctx N]\n",
                 argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  std::vector<int> tokens, positions;
  const char* prompt = nullptr;
  int greedy = 0, n_ctx = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens"))
      tokens = parse_ints(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompt"))
      prompt = argv[i + 1];
    else if (!std::strcmp(argv[i], "--positions"))
      positions = parse_ints(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--greedy"))
      greedy = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ctx"))
      n_ctx = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path, mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", model_path);
    return 1;
  }
  if (prompt) {
    std::vector<llama_token> ids(std::strlen(prompt) + 8);
    const int n = llama_tokenize(llama_model_get_vocab(model), prompt, int(std::strlen(prompt)), ids.data(),
                                 int(ids.size()), /*add_special=*/true, /*parse_special=*/false);
    if (n < 0) {
      std::fprintf(stderr, "cannot tokenize the prompt\n");
      return 1;
    }
    tokens.assign(ids.begin(), ids.begin() + n);
    std::printf("prompt");
    for (int id : tokens) std::printf(" %d", id);
    std::printf("\n");
  }
  if (tokens.empty()) {
    std::fprintf(stderr, "give --tokens or --prompt\n");
    return 2;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx > 0 ? n_ctx : int(tokens.size()) + greedy;
  cp.n_batch = cp.n_ubatch = int(tokens.size());
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int n = int(tokens.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  for (int p : positions) {
    const float* logits = llama_get_logits_ith(ctx, p);
    std::printf("logits %d", p);
    for (int i = 0; i < n_vocab; ++i) std::printf(" %.9g", logits[i]);
    std::printf("\n");
  }
  int next = argmax(llama_get_logits_ith(ctx, n - 1), n_vocab);
  llama_batch_free(batch);
  std::printf("greedy");
  for (int step = 0; step < greedy; ++step) {
    std::printf(" %d", next);
    if (step + 1 == greedy) break;
    llama_batch one = llama_batch_get_one(&next, 1);
    if (llama_decode(ctx, one) != 0) {
      std::fprintf(stderr, "llama_decode failed at step %d\n", step);
      return 1;
    }
    next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
  }
  std::printf("\n");
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
