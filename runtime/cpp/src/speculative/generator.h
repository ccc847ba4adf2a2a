// SpeculativeTokenGenerator (runtime/speculative/generator.py): draft -> tensorize ->
// verify -> accept -> commit -> emit, over any SpeculativeDraftRunner and tree shape. Every
// step emits the accepted path and one more token from the target.
#pragma once

#include <memory>
#include <string>

#include "../generator.h"  // runtime/generator.py (this folder has its own generator.h)
#include "speculative/draft_runner.h"
#include "speculative/kv_cache.h"
#include "speculative/verifier.h"

namespace etspec {

class SpeculativeTokenGenerator : public TokenGenerator {
 public:
  // Refuses, before any request, a shape the target cannot verify in one call or the draft
  // cannot hold, and a KV strategy the target does not support.
  SpeculativeTokenGenerator(std::unique_ptr<SpeculativeDraftRunner> draft,
                            const TargetMetadata& target, std::unique_ptr<TreePolicy> policy,
                            std::string kv_strategy = contract::kDefaultKvStrategy);
  int64_t generate(GenerationContext& ctx, Sink& sink) override;
  bool needs_hidden() const override { return draft_->needs_hidden(); }
  void reset() override { draft_->reset(); }
  const TreePolicy& policy() const { return *policy_; }
  std::string policy_report() override { return policy_->report(); }
  void memory(std::map<std::string, int64_t>& out) const override { draft_->memory(out); }

 private:
  // One step that proposes nothing (a target decode) or verifies the choice's proposal;
  // nullopt once the sink says stop. `root` becomes the step's last emitted token.
  std::optional<StepOutcome> decode(GenerationContext& ctx, Sink& sink, SpecKVCacheManager& kv,
                                    int64_t& root);
  std::optional<StepOutcome> speculate(GenerationContext& ctx, Sink& sink,
                                       SpecKVCacheManager& kv, int64_t& root,
                                       const Choice& choice, const Offer* offer, int64_t height);

  std::unique_ptr<SpeculativeDraftRunner> draft_;
  std::unique_ptr<TreePolicy> policy_;
  std::string kv_strategy_;
  Verifier verifier_;
};

// Refuse a shape whose trees cannot be verified by this target in one call.
void check_shape_fits(const TreeShape& shape, const TargetMetadata& target);

}  // namespace etspec
