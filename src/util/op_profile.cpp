#include "util/op_profile.h"

namespace kvslim {

std::atomic<bool> OpProfile::enabled_{false};
std::array<std::atomic<int64_t>, static_cast<int>(ProfOp::kCount)> OpProfile::totals_{};
std::array<std::atomic<int64_t>, static_cast<int>(ProfOp::kCount)> OpProfile::counts_{};

std::string_view prof_op_name(ProfOp op) {
  switch (op) {
    case ProfOp::Embed: return "embedding";
    case ProfOp::Norm: return "rmsnorm";
    case ProfOp::MatvecQKV: return "matvec q,k,v";
    case ProfOp::Rope: return "rope";
    case ProfOp::KvAppend: return "kv append";
    case ProfOp::Attention: return "attention";
    case ProfOp::MatvecO: return "matvec o";
    case ProfOp::MatvecGateUp: return "matvec gate,up";
    case ProfOp::Swiglu: return "swiglu";
    case ProfOp::MatvecDown: return "matvec down";
    case ProfOp::Moe: return "moe ffn";
    case ProfOp::Residual: return "residual add";
    case ProfOp::MatvecOutput: return "matvec output";
    case ProfOp::PressHooks: return "press hooks";
    case ProfOp::Sampling: return "sampling";
    case ProfOp::PoolWait: return "pool wait (sync)";
    case ProfOp::kCount: break;
  }
  return "?";
}

void OpProfile::reset() {
  for (auto& t : totals_) t.store(0, std::memory_order_relaxed);
  for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
}

}  // namespace kvslim
