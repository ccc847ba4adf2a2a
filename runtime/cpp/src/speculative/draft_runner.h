// The draft seam (runtime/speculative/draft_runner.py): a draft method is a runner with a
// few verbs (reset, prefill, propose, accept); the speculative loop never asks which.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact.h"
#include "program.h"
#include "speculative/costs.h"
#include "speculative/shapes.h"

namespace etspec {

// What one verify committed, as the draft learns it.
struct Acceptance {
  int64_t position = 0;         // committed length before the step (the root's position)
  std::vector<int64_t> tokens;  // the root and the accepted draft tokens
  int64_t next_token = 0;       // emitted after them by the target
  std::vector<float> hidden;    // the target's states of `tokens`, one row each
};

class SpeculativeDraftRunner {
 public:
  virtual ~SpeculativeDraftRunner() = default;
  virtual void reset() = 0;
  // The prompt (in the target KV), the first generated token and the prompt's target
  // states; returns the draft calls made.
  virtual int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                          const Tensor& hidden) = 0;
  // The proposal of one step in `shape`, at most `max_height` levels deep.
  virtual Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) = 0;
  // Returns the draft calls made.
  virtual int64_t accept(const Acceptance& acceptance) = 0;
  // Refuse a target this draft cannot serve, or a shape that does not fit its program.
  virtual void check_target(const TargetMetadata& target) const {}
  virtual void check_shape(const TreeShape& shape) const {}
  // Whether accept needs the target's hidden states of the accepted rows.
  virtual bool needs_hidden() const { return true; }
  // Whether proposals can branch (trees); a drafter without (prompt lookup) runs chains.
  virtual bool branching() const { return true; }
  // Whether propose runs a draft model (the dispatcher weighs its shapes).
  virtual bool has_model() const { return true; }
  // Whether offer() may give a proposal that costs no model call (prompt lookup).
  virtual bool offers() const { return false; }
  // A chain of at most `max_tokens` that costs no model call, and how it was found (prompt
  // lookup's match); nullopt when there is none.
  virtual std::optional<Offer> offer(int64_t max_tokens) const { return std::nullopt; }
  // Its calls' wall times, timed by `probe` (--tree auto's cost model).
  virtual DraftCosts step_costs(const CostProbe& probe) { return {}; }
  // The bytes the draft adds (GenerationStats.memory's draft_* entries).
  virtual void memory(std::map<std::string, int64_t>& out) const = 0;
};

}  // namespace etspec
