#include "speculative/shapes.h"

#include <algorithm>
#include <numeric>

#include "artifact.h"

namespace etspec {

std::vector<int64_t> top(const std::vector<float>& x, int64_t n) {
  std::vector<int64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  n = std::min<int64_t>(n, x.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int64_t a, int64_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  order.resize(n);
  return order;
}

ChainShape::ChainShape(int64_t length) : length_(length) {
  if (length < 1) {
    throw Error(message("chain_length", {{"value", std::to_string(length)}}));
  }
  name = "chain" + std::to_string(length);
  max_nodes = length;
  max_height = length;
  fed_nodes = length - 1;
  levels = length - 1;
}

NoDraftShape::NoDraftShape() : ChainShape(Empty{}) { name = contract::kNoDraftShape; }

bool Choice::decodes() const { return lookup == 0 && shape->max_nodes == 0; }

Proposal ChainShape::grow(Expander& expansion, int64_t max_height, Sampler& sampler) const {
  // The top-1 token of each level when greedy, a sample of the draft's distribution when
  // sampling (kept, in target ids, for the verifier).
  const auto& ids = *expansion.target_ids;
  const int64_t n = std::min(length_, max_height), vd = ids.size();
  Proposal out;
  std::vector<float> logits = expansion.root();
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) logits = expansion.expand({i - 1}, {out.tokens.back()})[0];
    out.parents.push_back(i);
    if (sampler.greedy()) {
      out.tokens.push_back(ids[argmax(logits.data(), vd)]);
      continue;
    }
    TokenDist q = sampler.dist(logits.data(), vd);
    q.rename(ids);  // the verifier compares q with the target's p: target ids
    out.tokens.push_back(sampler.draw(q, expansion.position + i + 1));
    // A coupled verifier needs no q: it races the target's own distribution.
    if (!sampler.coupled()) out.q.push_back(std::move(q));
  }
  out.calls = expansion.calls;
  return out;
}

}  // namespace etspec
