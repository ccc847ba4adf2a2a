#include "speculative/prompt_lookup.h"

#include <algorithm>

namespace etspec {

PromptLookupDraftRunner::PromptLookupDraftRunner(int64_t max_ngram, int64_t min_ngram)
    : max_ngram_(max_ngram), min_ngram_(min_ngram) {
  if (!(1 <= min_ngram && min_ngram <= max_ngram)) {
    throw Error(message("ngram_range", {}));
  }
}

int64_t PromptLookupDraftRunner::prefill(const std::vector<int64_t>& prompt, int64_t first,
                                         const Tensor&) {
  history_ = prompt;
  history_.push_back(first);
  return 0;
}

int64_t PromptLookupDraftRunner::accept(const Acceptance& acceptance) {
  history_.insert(history_.end(), acceptance.tokens.begin() + 1, acceptance.tokens.end());
  history_.push_back(acceptance.next_token);
  return 0;
}

std::pair<int64_t, std::vector<int64_t>> PromptLookupDraftRunner::match(int64_t max_tokens) const {
  const int64_t total = history_.size();
  for (int64_t n = std::min(max_ngram_, total - 1); n >= min_ngram_; --n) {
    // Windows starting before the final n-gram itself; the latest match wins.
    const auto tail = history_.end() - n;
    for (int64_t s = total - 1 - n; s >= 0; --s) {
      if (std::equal(tail, history_.end(), history_.begin() + s)) {
        const int64_t start = s + n, end = std::min(total, start + max_tokens);
        return {n, {history_.begin() + start, history_.begin() + end}};
      }
    }
  }
  return {0, {}};
}

Proposal PromptLookupDraftRunner::propose(const TreeShape& shape, int64_t max_height, Sampler&) {
  // The matched n-gram's length is the evidence (prompt_lookup.py, contract::kAutoTrimZ).
  Proposal out;
  auto [n, tokens] = match(std::min({shape.max_height, shape.max_nodes, max_height}));
  out.tokens = std::move(tokens);
  for (size_t i = 0; i < out.tokens.size(); ++i) out.parents.push_back(i);
  if (!out.tokens.empty()) out.evidence = "ngram" + std::to_string(n);
  return out;
}

}  // namespace etspec
