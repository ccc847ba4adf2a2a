// Verifier (runtime/speculative/verifier.py): which path of a verified tree the target
// accepts, and the token it emits after it. Greedy: at each node take the child equal to the
// target's argmax; the first miss emits the argmax. Sampling: try the children in order,
// accept x with probability min(1, p(x)/q(x)), on rejection continue from
// normalize(max(p - q, 0)); q is the draft's distribution for a sampled chain and a point
// mass for a deterministic tree pick. Either way the emitted tokens are distributed as the
// target's sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "program.h"
#include "sampler.h"
#include "speculative/tree.h"

namespace etspec {

struct Verdict {
  std::vector<int64_t> nodes{0};  // the accepted path's rows, root first
  int64_t next_token = 0;         // the correction or bonus token
  int64_t accepted() const { return static_cast<int64_t>(nodes.size()) - 1; }
};

class Verifier {
 public:
  // `logits`: the verify's [rows, V]; `q`: the proposal's draft distributions (empty: every
  // node a deterministic pick); `index`: the sequence index of the root's children.
  Verdict verify(const DraftTree& tree, const Tensor& logits, Sampler& sampler,
                 const std::vector<TokenDist>& q, int64_t vocab, int64_t index) const;
};

}  // namespace etspec
