#include "speculative/verifier.h"

#include <algorithm>

namespace etspec {

Verdict Verifier::verify(const DraftTree& tree, const Tensor& logits, Sampler& sampler,
                         const std::vector<TokenDist>& q, int64_t vocab, int64_t index) const {
  const int64_t v = vocab;
  Verdict verdict;
  int64_t node = 0;
  while (true) {
    int64_t accepted = -1;
    if (sampler.greedy() || sampler.coupled()) {
      // Greedy: the argmax. Coupled: the token the target's distribution races to at this
      // node's child index (the one target-only decoding with the seed emits there).
      const int64_t depth = verdict.nodes.size() - 1;
      const int64_t best = sampler.greedy()
                               ? argmax(logits.row(node), v)
                               : sampler.draw(sampler.dist(logits.row(node), v), index + depth);
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
      // Only the rows on the walked path become distributions (Sampler::dist).
      TokenDist p = sampler.dist(logits.row(node), v), r;
      for (int64_t ch : tree.children[node]) {
        const int64_t x = tree.tokens[ch];
        const bool mass = q.empty();  // a deterministic pick: all of q's mass on x
        const double px = p.prob(x), qx = mass ? 1.0 : q[ch - 1].prob(x);
        if (qx > 0 && sampler.uniform() < std::min(1.0, px / qx)) {
          accepted = ch;
          break;
        }
        // normalize(max(p - q, 0)); nothing left means p == q (the draft was exact, so
        // rejection had probability 0): keep p.
        if (mass ? p.without(x, r) : p.minus(q[ch - 1], r)) p = std::move(r);
      }
      if (accepted < 0) {
        verdict.next_token = p.draw(sampler.uniform());
        break;
      }
    }
    node = accepted;
    verdict.nodes.push_back(node);
  }
  return verdict;
}

}  // namespace etspec
