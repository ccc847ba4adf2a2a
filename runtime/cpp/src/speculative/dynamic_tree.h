// EAGLE-2 dynamic draft trees (runtime/speculative/dynamic_tree.py, the EAGLE repository's
// topK_genrate): the root's top-k children scored by log-probability; `depth` times, feed the
// k best frontier nodes in one batched draft call and score each one's top-k children by
// cumulative log-probability; then keep the `total_tokens - 1` best candidates in level
// order. Trees are `depth + 1` levels high; `total_tokens` counts the root.
#pragma once

#include <cstdint>

#include "speculative/shapes.h"

namespace etspec {

class DynamicTree : public TreeShape {
 public:
  DynamicTree(int64_t depth, int64_t topk, int64_t total_tokens);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override;

 private:
  int64_t depth_, topk_, total_tokens_;
};

}  // namespace etspec
