// Draft models behind one seam: the EAGLE-3 draft .pte (runtime/speculative/eagle3.py:
// prefill over the prompt's target states, tree growth in scratch slots past the context, an
// accept that rewrites the committed rows of the accepted path from the target's states) and
// Gemma 4's assistant inside the target .pte.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artifact.h"

namespace etspec {

// One proposal's view of a draft model (runtime/speculative/shapes.py's Expander): handle 0
// is the root; every expand numbers the nodes it feeds next (1, 2, ... in feeding order).
class Expander {
 public:
  virtual ~Expander() = default;
  // Logits [Vd] of the root's children.
  virtual const std::vector<float>& root() const = 0;
  // Logits [n][Vd] of the children of each fed node (`tokens`, children of `parents`).
  virtual std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                                 const std::vector<int64_t>& tokens) = 0;
  int64_t calls = 0;
};

// The draft seam (runtime/speculative/draft_runner.py): the loop never asks what drafts.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void reset() = 0;
  // The prompt (in the target KV), the first generated token and the prompt's target states.
  virtual int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                          const Tensor& hidden) = 0;
  // The target committed `tokens` (root + accepted) at `position`; `hidden` holds their
  // target states (one row each); `next` was emitted after them.
  virtual int64_t accept(int64_t position, const std::vector<int64_t>& tokens, int64_t next,
                         const std::vector<float>& hidden) = 0;
  virtual std::unique_ptr<Expander> expansion() = 0;
  // Throws when a tree feeding `fed_nodes` nodes per step does not fit.
  virtual void check_shape(const std::string& name, int64_t fed_nodes) const = 0;
  // The bytes the draft adds (GenerationStats.memory's draft_* entries).
  virtual void memory(std::map<std::string, int64_t>& out) const = 0;
  const std::vector<int64_t>& target_ids() const { return target_ids_; }
  int64_t target_vocab() const { return target_vocab_; }

 protected:
  int64_t target_vocab_ = 0;
  std::vector<int64_t> target_ids_;  // draft id -> target id
};

// The EAGLE-3 draft .pte.
class Eagle3Draft : public Drafter {
 public:
  Eagle3Draft(Program& program, const TargetMetadata& target);
  void reset() override;
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  int64_t accept(int64_t position, const std::vector<int64_t>& tokens, int64_t next,
                 const std::vector<float>& hidden) override;
  std::unique_ptr<Expander> expansion() override;
  void check_shape(const std::string& name, int64_t fed_nodes) const override;
  void memory(std::map<std::string, int64_t>& out) const override;
  int64_t scratch() const { return meta_.cache_size - meta_.max_context; }
  MaskLayout layout() const { return {meta_.max_context, meta_.cache_size}; }
  const DraftMetadata& meta() const { return meta_; }

 private:
  friend class Expansion;
  Program& program_;
  DraftMetadata meta_;
  std::vector<float> logits_;  // the root's children, [Vd]
  std::vector<float> hidden_;  // the root's output state, [H]
  int64_t pos_ = 0;
};

// One EAGLE-3 proposal's growth. A fed node pairs its token with its parent's output state
// at position committed + depth - 1, sits in the next scratch slot and sees the committed
// slots, its fed ancestors' slots and its own.
class Expansion : public Expander {
 public:
  explicit Expansion(Eagle3Draft& draft);
  const std::vector<float>& root() const override { return draft_.logits_; }
  std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                         const std::vector<int64_t>& tokens) override;

 private:
  Eagle3Draft& draft_;
  int64_t fed_ = 0;
  std::vector<int64_t> depth_{0};
  std::vector<float> states_;  // [handles][H]
  std::vector<float> seen_;    // [handles][scratch]: scratch columns a handle's children see
};

// Gemma 4's assistant, exported into the target .pte
// (runtime/speculative/gemma4_assistant.py): no KV of its own; every call reads the target's
// committed caches at the committed length, fed (token, state) rows.
class Gemma4Assistant : public Drafter {
 public:
  explicit Gemma4Assistant(Program& target);
  void reset() override { pos_ = 0; }
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  int64_t accept(int64_t position, const std::vector<int64_t>& tokens, int64_t next,
                 const std::vector<float>& hidden) override;
  std::unique_ptr<Expander> expansion() override;
  void check_shape(const std::string&, int64_t) const override {}
  void memory(std::map<std::string, int64_t>& out) const override { out[contract::kDraftKvBytes] = 0; }
  // Logits [n][V] and output states [n][Hb] of `tokens` fed `states`, in step-width calls.
  void run(const std::vector<int64_t>& tokens, const std::vector<float>& states,
           std::vector<std::vector<float>>& logits, std::vector<float>& out);
  int64_t width() const { return width_; }
  int64_t state_size() const { return state_.size(); }

 private:
  friend class AssistantExpansion;
  Program& program_;
  int64_t width_;
  int64_t token_ = 0;
  std::vector<float> state_;  // the target's final normed state before the next token
  int64_t pos_ = 0;
};

class AssistantExpansion : public Expander {
 public:
  explicit AssistantExpansion(Gemma4Assistant& assistant);
  const std::vector<float>& root() const override { return root_; }
  std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                         const std::vector<int64_t>& tokens) override;

 private:
  Gemma4Assistant& assistant_;
  std::vector<float> root_;
  std::vector<float> states_;  // [handles][Hb]
};

}  // namespace etspec
