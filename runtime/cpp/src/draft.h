// The EAGLE-3 draft .pte (runtime/speculative/eagle3.py): prefill over the prompt's target
// states, tree growth in scratch slots past the context (an Expansion per proposal), and
// accept, which rewrites the committed rows of the accepted path from the target's states.
#pragma once

#include <cstdint>
#include <vector>

#include "artifact.h"

namespace etspec {

class Eagle3Draft {
 public:
  Eagle3Draft(Program& program, const TargetMetadata& target);
  void reset();
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first, const Tensor& hidden);
  // The target committed `tokens` (root + accepted) at `position`; `hidden` holds their
  // target states (one row each); `next` was emitted after them.
  int64_t accept(int64_t position, const std::vector<int64_t>& tokens, int64_t next,
                 const std::vector<float>& hidden);
  int64_t scratch() const { return meta_.cache_size - meta_.max_context; }
  const DraftMetadata& meta() const { return meta_; }
  const std::vector<int64_t>& target_ids() const { return target_ids_; }
  int64_t target_vocab() const { return target_vocab_; }

 private:
  friend class Expansion;
  Program& program_;
  DraftMetadata meta_;
  int64_t target_vocab_;
  std::vector<int64_t> target_ids_;  // draft id -> target id
  std::vector<float> logits_;        // the root's children, [Vd]
  std::vector<float> hidden_;        // the root's output state, [H]
  int64_t pos_ = 0;
};

// One proposal's growth (an Expander): handle 0 is the root; every expand numbers the nodes
// it feeds next. A fed node pairs its token with its parent's output state at position
// committed + depth - 1, sits in the next scratch slot and sees the committed slots, its
// fed ancestors' slots and its own.
class Expansion {
 public:
  explicit Expansion(Eagle3Draft& draft);
  const std::vector<float>& root() const { return draft_.logits_; }
  // Logits [n][Vd] of the children of each fed node.
  std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                         const std::vector<int64_t>& tokens);
  int64_t calls = 0;

 private:
  Eagle3Draft& draft_;
  int64_t fed_ = 0;
  std::vector<int64_t> depth_{0};
  std::vector<float> states_;  // [handles][H]
  std::vector<float> seen_;    // [handles][scratch]: scratch columns a handle's children see
};

}  // namespace etspec
