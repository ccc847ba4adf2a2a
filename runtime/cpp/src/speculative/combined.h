// runtime/speculative/combined.py: an EAGLE-3 draft and prompt lookup, chosen step by step.
// Each step the lookup is asked first (no model call); its chain is proposed instead of the
// draft's shape when it is expected to emit more tokens per second: the lookup's acceptance
// is learned by depth per matched n-gram length, the draft's tokens per step per shape, each
// step's time per shape or per lookup verify width, all compared at UCB1 bounds. A seeded
// sampling request learns afresh and prices steps by fixed_costs, so it repeats exactly.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/dispatcher.h"
#include "speculative/draft_runner.h"
#include "speculative/prompt_lookup.h"

namespace etspec {

// Upper confidence bound of the tokens a lookup chain of `length` emits per step; a depth
// never reached borrows the deepest one reached, count included (combined.lookup_tokens).
double lookup_tokens(const DepthAcceptance* accepted, int64_t length, double z);

class CombinedDraftRunner : public SpeculativeDraftRunner {
 public:
  CombinedDraftRunner(std::unique_ptr<SpeculativeDraftRunner> model,
                      std::unique_ptr<PromptLookupDraftRunner> lookup,
                      std::vector<int64_t> verify_widths);
  void reset() override;
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) override;
  int64_t accept(const Acceptance& acceptance) override;
  void observe(const StepOutcome& step) override;
  void check_target(const TargetMetadata& target) const override { model_->check_target(target); }
  void check_shape(const TreeShape& shape) const override { model_->check_shape(shape); }
  bool needs_hidden() const override { return model_->needs_hidden(); }
  bool branching() const override { return model_->branching(); }
  DraftCosts step_costs(const CostProbe& probe) override { return model_->step_costs(probe); }
  void memory(std::map<std::string, int64_t>& out) const override { model_->memory(out); }

 private:
  // What the choice has learned: over the runner's life, or one seeded request's.
  struct Learned {
    std::map<int64_t, DepthAcceptance> lookup;  // per matched n
    std::map<std::string, StepRecord> model;    // per draft shape
    std::map<std::string, std::deque<double>> seconds;  // recent step times per arm
    int64_t steps = 0;
    std::optional<double> step_s(const std::string& arm) const;
  };
  // The last proposal, until its step's outcome arrives.
  struct Pending {
    Learned* learned = nullptr;
    std::string arm;
    const TreeShape* shape = nullptr;
    int64_t ngram = 0;  // the lookup's matched n (0: the draft proposed)
    int64_t width = 0;  // the lookup's verify width
  };
  Learned& learned_for(const Sampler& sampler);
  double model_bound(const Learned& learned, const TreeShape& shape, double z) const;
  double lookup_bound(const Learned& learned, int64_t ngram, int64_t length, int64_t width,
                      double z) const;

  std::unique_ptr<SpeculativeDraftRunner> model_;
  std::unique_ptr<PromptLookupDraftRunner> lookup_;
  std::vector<int64_t> widths_;
  StepCosts fixed_;
  Learned learned_;
  std::optional<Learned> request_;  // this request's, when seeded
  std::optional<Pending> pending_;
};

}  // namespace etspec
