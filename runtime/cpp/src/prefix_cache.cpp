#include "prefix_cache.h"

#include <algorithm>

namespace etspec {

int64_t PrefixCache::reusable(const std::vector<int64_t>& ids, bool needs_hidden) const {
  int64_t n = std::min<int64_t>(tokens_.size(), int64_t(ids.size()) - 1);
  if (needs_hidden) n = std::min(n, hidden_rows_);
  if (n <= 0) return 0;
  return std::mismatch(ids.begin(), ids.begin() + n, tokens_.begin()).first - ids.begin();
}

void PrefixCache::truncate(int64_t n) {
  if (int64_t(tokens_.size()) > n) tokens_.resize(n);
  hidden_rows_ = std::min(hidden_rows_, n);
}

void PrefixCache::keep_hidden(int64_t start, const float* rows, int64_t n, int64_t cols,
                              int64_t capacity) {
  if (start > hidden_rows_) return;
  if (cols != cols_) {  // nothing before is kept
    hidden_.clear();
    cols_ = cols;
    hidden_rows_ = 0;
    if (start > 0) return;
  }
  const int64_t need = start + n, rows_now = hidden_.size() / cols;
  if (rows_now < need) {
    // Grown by doubling to what the conversation needs, not the whole context: a Gemma 3
    // 270M export's 8,192 positions would hold 63 MB of states up front.
    hidden_.resize(std::min(capacity, std::max({need, 2 * rows_now, int64_t(256)})) * cols);
  }
  std::copy_n(rows, n * cols, hidden_.begin() + start * cols);
  hidden_rows_ = start + n;
}

void PrefixCache::hold(std::vector<int64_t> tokens) {
  tokens_ = std::move(tokens);
  hidden_rows_ = std::min<int64_t>(hidden_rows_, tokens_.size());
}

void PrefixCache::forget() {
  tokens_.clear();
  hidden_rows_ = 0;
}

}  // namespace etspec
