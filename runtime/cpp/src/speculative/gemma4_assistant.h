// Gemma 4's assistant, exported into the target .pte (runtime/speculative/
// gemma4_assistant.py): no KV of its own; every call reads the target's committed caches at
// the committed length, fed (token, state) rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "speculative/draft_runner.h"

namespace etspec {

// assistant_step calls of one proposal: every node sits at the committed length `position`.
struct AssistantStep {
  TargetProgram& program;
  int64_t width;     // rows of one call
  int64_t position;  // the committed length
  int64_t state_size;
  // Logits [n][V] and output states [n][Hb] of `tokens` fed `states`, in step-width calls.
  void operator()(const std::vector<int64_t>& tokens, const std::vector<float>& states,
                  std::vector<std::vector<float>>& logits, std::vector<float>& out) const;
  int64_t calls(int64_t rows) const { return (rows + width - 1) / width; }
};

class Gemma4AssistantDraftRunner : public SpeculativeDraftRunner {
 public:
  explicit Gemma4AssistantDraftRunner(TargetProgram& target);
  void reset() override { position_ = 0; }
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) override;
  int64_t accept(const Acceptance& acceptance) override;
  // One call per level, plus the proposal's root call (where an EAGLE-3 draft's extend is).
  DraftCosts step_costs(const CostProbe& probe) override;
  void memory(std::map<std::string, int64_t>& out) const override {
    out[contract::kDraftKvBytes] = 0;
  }

 private:
  TargetProgram& program_;
  std::vector<int64_t> target_ids_;  // the identity: the assistant predicts target ids
  int64_t token_ = 0;
  std::vector<float> state_;  // the target's final normed state before the next token
  int64_t position_ = 0;
};

// One proposal's growth: handle 0 is the root, fed with the emitted token and the target's
// state; handle h > 0 is the h-th expanded node.
class AssistantExpansion : public Expander {
 public:
  AssistantExpansion(const AssistantStep& step, int64_t token, const std::vector<float>& state);
  const std::vector<float>& root() const override { return root_; }
  std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                         const std::vector<int64_t>& tokens) override;

 private:
  AssistantStep step_;
  std::vector<float> root_;
  std::vector<float> states_;  // [handles][Hb]
};

}  // namespace etspec
