// runtime/speculative/combined.py: an EAGLE-3 draft and prompt lookup, both kept in step with
// every committed token. Each step it offers the lookup's match (offer) and grows the model's
// shape when asked (propose); which one runs, and how much of the match is worth a verify, is
// the dispatcher's choice (speculative/dispatcher.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/draft_runner.h"
#include "speculative/prompt_lookup.h"

namespace etspec {

class CombinedDraftRunner : public SpeculativeDraftRunner {
 public:
  CombinedDraftRunner(std::unique_ptr<SpeculativeDraftRunner> model,
                      std::unique_ptr<PromptLookupDraftRunner> lookup);
  void reset() override;
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) override {
    return model_->propose(shape, max_height, sampler);
  }
  int64_t accept(const Acceptance& acceptance) override;
  std::optional<Offer> offer(int64_t max_tokens) const override {
    return lookup_->offer(max_tokens);
  }
  bool offers() const override { return true; }
  void check_target(const TargetMetadata& target) const override { model_->check_target(target); }
  void check_shape(const TreeShape& shape) const override { model_->check_shape(shape); }
  bool needs_hidden() const override { return model_->needs_hidden(); }
  bool branching() const override { return model_->branching(); }
  DraftCosts step_costs(const CostProbe& probe) override { return model_->step_costs(probe); }
  void memory(std::map<std::string, int64_t>& out) const override { model_->memory(out); }

 private:
  std::unique_ptr<SpeculativeDraftRunner> model_;
  std::unique_ptr<PromptLookupDraftRunner> lookup_;
};

}  // namespace etspec
