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
        // Where the continuation runs into the end of the text, it goes on as it went
        // (LZ77's overlapping copy): in a loop the latest match is one period back.
        const int64_t start = s + n, period = total - start;
        std::vector<int64_t> tokens(std::max<int64_t>(max_tokens, 0));
        for (int64_t k = 0; k < max_tokens; ++k) tokens[k] = history_[start + k % period];
        return {n, std::move(tokens)};
      }
    }
  }
  return {0, {}};
}

Proposal PromptLookupDraftRunner::propose(const TreeShape& shape, int64_t max_height, Sampler&) {
  Proposal out;
  out.tokens = match(std::min({shape.max_height, shape.max_nodes, max_height})).second;
  for (size_t i = 0; i < out.tokens.size(); ++i) out.parents.push_back(i);
  return out;
}

std::optional<Offer> PromptLookupDraftRunner::offer(int64_t max_tokens) const {
  // Under sampling a 1-gram match rarely pays for its verify, a 3-gram one nearly always
  // does: the dispatcher judges each by the acceptance seen under its n.
  auto [n, tokens] = match(max_tokens);
  if (tokens.empty()) return std::nullopt;
  return Offer{std::move(tokens), "ngram" + std::to_string(n)};
}

}  // namespace etspec
