// runtime/prefix_cache.py: what the target's KV cache holds between requests, so that a
// request sharing a prefix with it prefills only the rest (a conversation's next turn).
// Slots [0, tokens.size()) hold the KV of `tokens` (slot == position); hidden rows
// [0, hidden_rows) are the target's states of the first hidden_rows tokens, kept for a
// draft that reads them over the whole prompt.
#pragma once

#include <cstdint>
#include <vector>

namespace etspec {

class PrefixCache {
 public:
  // Leading tokens of `ids` that need no prefill: their common prefix with the tokens held
  // (with hidden states too, when `needs_hidden`), never the last token of `ids`.
  int64_t reusable(const std::vector<int64_t>& ids, bool needs_hidden) const;
  // Keeps the first n tokens only: a request is about to write from slot n.
  void truncate(int64_t n);
  // The target's states ([n, cols] row-major) of the tokens at start..start+n-1, just
  // written to the KV; rows after a gap are not kept. `capacity`: the context's rows.
  void keep_hidden(int64_t start, const float* rows, int64_t n, int64_t cols, int64_t capacity);
  // A request ended with `tokens` in slots [0, tokens.size()).
  void hold(std::vector<int64_t> tokens);
  // The caches were cleared.
  void forget();

  const std::vector<int64_t>& tokens() const { return tokens_; }
  // The first `n` kept rows, [n, cols]; valid until the next keep_hidden.
  const float* hidden() const { return hidden_.data(); }
  int64_t hidden_cols() const { return cols_; }

 private:
  std::vector<int64_t> tokens_;
  std::vector<float> hidden_;
  int64_t cols_ = 0, hidden_rows_ = 0;
};

}  // namespace etspec
