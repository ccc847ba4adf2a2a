// EAGLE-3 drafting from a draft .pte (runtime/speculative/eagle3.py): prefill over the
// prompt's target states, tree growth in scratch slots past the context, an accept that
// rewrites the committed rows of the accepted path from the target's states (the draft's
// commit, fused into the call that also yields the next root).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "masks.h"
#include "speculative/draft_runner.h"

namespace etspec {

// What the last prefill or accept left for the next proposal: the logits of the root's
// children [Vd] and the draft state they are fed with [H], at committed length `position`.
struct DraftRoot {
  std::vector<float> logits;
  std::vector<float> state;
  int64_t position = 0;
};

class Eagle3DraftRunner : public SpeculativeDraftRunner {
 public:
  // `window` > 0: the draft attends to its last `window` positions only (EAGLE-Pangu's
  // drafter-only truncation); the target and its verification are untouched.
  Eagle3DraftRunner(DraftProgram& program, const TargetMetadata& target, int64_t window = 0);
  void reset() override;
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) override;
  int64_t accept(const Acceptance& acceptance) override;
  void check_shape(const TreeShape& shape) const override;
  DraftCosts step_costs(const CostProbe& probe) override;
  void memory(std::map<std::string, int64_t>& out) const override;
  // Draft cache slots past the context, where tree nodes are fed.
  int64_t scratch() const { return program_.meta.cache_size - program_.meta.max_context; }

 private:
  MaskLayout layout() const { return {program_.meta.max_context, program_.meta.cache_size}; }
  // Runs the queued prefill, then feeds the queued acceptances in as few extend calls as
  // hold them; returns the calls.
  int64_t catch_up();
  int64_t run_prefill();  // the queued prefill; returns the calls
  // Writes committed rows `start..` (`tokens`, each paired with the token after it, `next`
  // for the last) from the target's states; the last row's output is the next root.
  void extend(int64_t start, const std::vector<int64_t>& tokens, int64_t next,
              const std::vector<float>& hidden);
  // Causal rows at `positions`, cut to the window; sets `width`.
  std::vector<float> causal(const std::vector<int64_t>& positions, int64_t& width) const;
  DraftProgram& program_;
  int64_t window_;
  int64_t target_vocab_;
  std::vector<int64_t> target_ids_;  // draft id -> target id
  DraftRoot root_;
  // Committed, not yet fed to the draft: accept only queues, so a step that drafts nothing
  // or that prompt lookup proposed costs no draft call (eagle3.py).
  std::vector<Acceptance> behind_;
  // The prompt not yet fed (prefill queues it): its tokens, the first token, its states.
  bool pending_ = false;
  std::vector<int64_t> pending_prompt_;
  int64_t pending_first_ = 0;
  Tensor pending_hidden_;
};

// Hides committed columns [0, committed) more than `window - 1` positions behind each row of
// a [positions.size(), width] mask (eagle3.py's DraftGeometry.truncate); 0: no window.
void truncate_to_window(std::vector<float>& mask, const std::vector<int64_t>& positions,
                        int64_t width, int64_t committed, int64_t window);

// One proposal's growth in the draft cache. A fed node pairs its token with its parent's
// output state at position committed + depth - 1, sits in the next scratch slot and sees the
// committed slots, its fed ancestors' slots and its own.
class Eagle3Expansion : public Expander {
 public:
  Eagle3Expansion(DraftProgram& program, const DraftRoot& root, int64_t window);
  const std::vector<float>& root() const override { return root_.logits; }
  std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                         const std::vector<int64_t>& tokens) override;

 private:
  DraftProgram& program_;
  const DraftRoot& root_;
  int64_t window_;
  int64_t scratch_;
  int64_t fed_ = 0;
  std::vector<int64_t> depth_{0};
  std::vector<float> states_;  // [handles][H]
  std::vector<float> seen_;    // [handles][scratch]: scratch columns a handle's children see
};

}  // namespace etspec
