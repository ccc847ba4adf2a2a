#include "speculative/dynamic_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "artifact.h"

namespace etspec {

namespace {

// log_softmax of one row in float, as torch.log_softmax(logits.float()) orders it.
std::vector<float> log_probs(const std::vector<float>& logits) {
  float top = -std::numeric_limits<float>::infinity();
  for (float x : logits) {
    if (std::isnan(x)) throw Error(message("draft_nan", {}));
    top = std::max(top, x);
  }
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - top));
  const float log_sum = static_cast<float>(std::log(sum));
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = (logits[i] - top) - log_sum;
  return out;
}

// a * b and a + b for counts >= 0, held at the largest int64: a --depth near 2^63 must be
// refused by the budget checks (the draft's scratch, the verify width), as Python's
// unbounded integers are, not wrap below them.
int64_t saturating_mul(int64_t a, int64_t b) {
  constexpr int64_t top = std::numeric_limits<int64_t>::max();
  return b != 0 && a > top / b ? top : a * b;
}
int64_t saturating_add(int64_t a, int64_t b) {
  constexpr int64_t top = std::numeric_limits<int64_t>::max();
  return a > top - b ? top : a + b;
}

}  // namespace

DynamicTree::DynamicTree(int64_t depth, int64_t topk, int64_t total_tokens)
    : depth_(depth), topk_(topk), total_tokens_(total_tokens) {
  if (depth < 0 || topk < 1 || total_tokens < 2) {
    throw Error(message("dynamic_knobs", {{"depth", std::to_string(depth)},
                                          {"topk", std::to_string(topk)},
                                          {"total", std::to_string(total_tokens)}}));
  }
  name = "dynamic-d" + std::to_string(depth) + "k" + std::to_string(topk) + "t" +
         std::to_string(total_tokens);
  max_nodes = std::min(total_tokens - 1,
                       saturating_add(topk, saturating_mul(saturating_mul(depth, topk), topk)));
  max_height = saturating_add(depth, 1);
  fed_nodes = saturating_mul(depth, topk);
  levels = depth;
}

Proposal DynamicTree::grow(Expander& expansion, int64_t max_height, Sampler&) const {
  Proposal out;
  if (max_height < 1) {
    out.calls = expansion.calls;
    return out;
  }
  const auto& ids = *expansion.target_ids;
  const int64_t k = topk_;
  // Per candidate (all levels, in creation order): score, draft id, parent candidate (-1:
  // the root) and the expander handle it was fed as (0 until fed).
  std::vector<float> scores;
  std::vector<int64_t> draft_ids, parent, handle;
  const std::vector<float> root = log_probs(expansion.root());
  for (int64_t d : top(root, k)) {
    scores.push_back(root[d]);
    draft_ids.push_back(d);
    parent.push_back(-1);
    handle.push_back(0);
  }
  std::vector<int64_t> frontier(scores.size());
  std::iota(frontier.begin(), frontier.end(), 0);
  int64_t fed = 0;
  for (int64_t level = 0; level < std::min(depth_, max_height - 1); ++level) {
    std::vector<int64_t> parents, tokens;
    for (int64_t c : frontier) {
      parents.push_back(parent[c] < 0 ? 0 : handle[parent[c]]);
      tokens.push_back(ids[draft_ids[c]]);
    }
    const auto logits = expansion.expand(parents, tokens);
    for (int64_t c : frontier) handle[c] = ++fed;
    const int64_t base = scores.size();
    for (size_t r = 0; r < frontier.size(); ++r) {
      const std::vector<float> lp = log_probs(logits[r]);
      const float front = scores[frontier[r]];
      for (int64_t d : top(lp, k)) {
        scores.push_back(lp[d] + front);
        draft_ids.push_back(d);
        parent.push_back(frontier[r]);
        handle.push_back(0);
      }
    }
    const std::vector<float> level_scores(scores.begin() + base, scores.end());
    frontier.clear();
    for (int64_t p : top(level_scores, k)) frontier.push_back(base + p);
  }
  // Rerank: the total_tokens - 1 best candidates, in level order (parents first).
  std::vector<int64_t> chosen = top(scores, total_tokens_ - 1);
  std::sort(chosen.begin(), chosen.end());
  std::vector<int64_t> row(scores.size(), -1);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const int64_t c = chosen[i];
    if (!std::isfinite(scores[c])) {
      throw Error(message("tree_neg_inf", {}));
    }
    row[c] = i + 1;
    const int64_t p = parent[c] < 0 ? 0 : row[parent[c]];
    if (p < 0) throw Error(message("rerank_orphan", {}));
    out.tokens.push_back(ids[draft_ids[c]]);
    out.parents.push_back(p);
  }
  out.calls = expansion.calls;
  return out;
}

}  // namespace etspec
