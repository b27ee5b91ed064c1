// A press that runs another press: every hook goes to the inner one unchanged. Wrappers (adakv,
// the tests' recorders) derive from it and override only the hooks they change, so none of them
// can silently drop a hook. A hook added to Press is forwarded here and called in
// tests/test_forwarding_press.cpp, which fails when one does not reach the inner press.
#pragma once

#include <memory>
#include <optional>

#include "press/press.h"

namespace kvslim {

class ForwardingPress : public Press {
 public:
  // Runs `inner`, which must outlive this press.
  explicit ForwardingPress(Press& inner) : inner_(&inner) {}
  // Runs and owns `inner`.
  explicit ForwardingPress(std::unique_ptr<Press> inner) : owned_(std::move(inner)), inner_(owned_.get()) {}

  AttentionProbe* prefill_probe() override { return inner_->prefill_probe(); }
  AttentionProbe* decode_probe() override { return inner_->decode_probe(); }
  SparseSelector* sparse_selector() override { return inner_->sparse_selector(); }
  int prefill_block() const override { return inner_->prefill_block(); }
  bool evicts_each_prefill_block() const override { return inner_->evicts_each_prefill_block(); }
  void check_budget(int64_t budget) const override { inner_->check_budget(budget); }
  void begin(PressContext& ctx) override { inner_->begin(ctx); }
  void before_prefill_block(PressContext& ctx, int64_t n_tokens) override {
    inner_->before_prefill_block(ctx, n_tokens);
  }
  void after_prefill_block(PressContext& ctx) override { inner_->after_prefill_block(ctx); }
  void end_prefill(PressContext& ctx) override { inner_->end_prefill(ctx); }
  void after_extend(PressContext& ctx) override { inner_->after_extend(ctx); }
  void after_decode_step(PressContext& ctx) override { inner_->after_decode_step(ctx); }
  void begin_turn(PressContext& ctx) override { inner_->begin_turn(ctx); }
  void rewind(PressContext& ctx) override { inner_->rewind(ctx); }
  void save_state(PressState& state) const override { inner_->save_state(state); }
  void load_state(PressContext& ctx, const PressState& state) override { inner_->load_state(ctx, state); }
  std::optional<TokenCost> token_cost() const override { return inner_->token_cost(); }

 protected:
  Press& inner() const { return *inner_; }

 private:
  std::unique_ptr<Press> owned_;  // null when borrowed
  Press* inner_;
};

}  // namespace kvslim
