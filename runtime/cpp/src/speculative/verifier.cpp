#include "speculative/verifier.h"

#include <algorithm>

namespace etspec {

Verdict Verifier::verify(const DraftTree& tree, const Tensor& logits, Sampler& sampler,
                         const std::vector<std::vector<float>>& q, int64_t vocab) const {
  const int64_t v = vocab;
  Verdict verdict;
  int64_t node = 0;
  while (true) {
    int64_t accepted = -1;
    if (sampler.greedy()) {
      const int64_t best = argmax(logits.row(node), v);
      for (int64_t ch : tree.children[node]) {
        if (tree.tokens[ch] == best) {
          accepted = ch;
          break;
        }
      }
      if (accepted < 0) {
        verdict.next_token = best;
        break;
      }
    } else {
      auto p = sampler.target_probs(logits.row(node), v);
      for (int64_t ch : tree.children[node]) {
        const int64_t x = tree.tokens[ch];
        const bool mass = q.empty();
        const double px = p[x], qx = mass ? 1.0 : q[ch - 1][x];
        if (qx > 0 && sampler.uniform() < std::min(1.0, px / qx)) {
          accepted = ch;
          break;
        }
        std::vector<float> r(p);
        if (mass) {
          r[x] = std::max(p[x] - 1.0f, 0.0f);
        } else {
          const auto& qc = q[ch - 1];
          for (int64_t j = 0; j < v; ++j) r[j] = std::max(p[j] - qc[j], 0.0f);
        }
        double total = 0;
        for (float y : r) total += y;
        if (total > 0) {  // p == q: the draft was exact (rejection had probability 0)
          for (auto& y : r) y = static_cast<float>(y / total);
          p = std::move(r);
        }
      }
      if (accepted < 0) {
        verdict.next_token = sampler.draw(p);
        break;
      }
    }
    node = accepted;
    verdict.nodes.push_back(node);
  }
  return verdict;
}

}  // namespace etspec
