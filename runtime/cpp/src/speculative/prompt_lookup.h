// Model-free drafting by n-gram lookup in the sequence so far
// (runtime/speculative/prompt_lookup.py): the tokens that followed the most recent earlier
// occurrence of the last n tokens, longest n first. It reads no target state and holds no KV.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "speculative/draft_runner.h"

namespace etspec {

class PromptLookupDraftRunner : public SpeculativeDraftRunner {
 public:
  PromptLookupDraftRunner(int64_t max_ngram, int64_t min_ngram);
  void reset() override { history_.clear(); }
  int64_t prefill(const std::vector<int64_t>& prompt, int64_t first,
                  const Tensor& hidden) override;
  // A fixed shape: the deepest chain it allows, deterministic picks (point masses).
  Proposal propose(const TreeShape& shape, int64_t max_height, Sampler& sampler) override;
  // The match, its n-gram length as the evidence ("ngram3").
  std::optional<Offer> offer(int64_t max_tokens) const override;
  bool has_model() const override { return false; }
  bool offers() const override { return true; }
  int64_t accept(const Acceptance& acceptance) override;
  void memory(std::map<std::string, int64_t>& out) const override {}
  bool needs_hidden() const override { return false; }
  bool branching() const override { return false; }
  // The longest n-gram matched and the `max_tokens` tokens that followed its latest earlier
  // occurrence (repeating those up to the end of the text, when fewer followed); {0, {}}
  // when nothing matches.
  std::pair<int64_t, std::vector<int64_t>> match(int64_t max_tokens) const;

 private:
  int64_t max_ngram_, min_ngram_;
  std::vector<int64_t> history_;
};

}  // namespace etspec
