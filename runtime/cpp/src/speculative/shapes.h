// Tree shapes (runtime/speculative/shapes.py): how a proposal grows, independent of which
// draft model grows it. A shape is an algorithm over an Expander (the draft model seen as
// "the root's children" plus "feed these nodes, get their children", batched per level)
// and yields a Proposal: draft nodes 1..M in BFS order, each with a parent in [0, i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sampler.h"

namespace etspec {

struct Proposal {
  std::vector<int64_t> tokens;   // target-vocabulary ids of nodes 1..M
  std::vector<int64_t> parents;  // parents[i - 1] of node i, in [0, i)
  // q[i - 1]: the target-vocabulary distribution node i was drawn from (sampled chains);
  // empty: every node is a deterministic pick (a point mass for the verifier).
  std::vector<std::vector<float>> q;
  int64_t calls = 0;
};

// One proposal's view of a draft model: handle 0 is the root; every expand numbers the
// nodes it feeds next (1, 2, ... in feeding order).
class Expander {
 public:
  virtual ~Expander() = default;
  // Logits [Vd] of the root's children.
  virtual const std::vector<float>& root() const = 0;
  // Logits [n][Vd] of the children of each fed node (`tokens`, children of `parents`).
  virtual std::vector<std::vector<float>> expand(const std::vector<int64_t>& parents,
                                                 const std::vector<int64_t>& tokens) = 0;
  const std::vector<int64_t>* target_ids = nullptr;  // draft id -> target id, [Vd]
  int64_t vocab_size = 0;                            // the target's
  int64_t calls = 0;                                 // model calls so far
};

class TreeShape {
 public:
  virtual ~TreeShape() = default;
  // The proposal of one step, at most `max_height` levels deep.
  virtual Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const = 0;
  std::string name;
  int64_t max_nodes = 0;   // draft nodes verified (verify width needed: this + 1)
  int64_t max_height = 0;  // deepest node: the most draft tokens one step can accept
  int64_t fed_nodes = 0;  // nodes fed to the draft (scratch slots needed)
};

// `length` draft tokens in a line: the top-1 token of each level when greedy, a sample of
// the draft's (processed) distribution when sampling.
class ChainShape : public TreeShape {
 public:
  explicit ChainShape(int64_t length);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override;

 private:
  int64_t length_;
};

// Indices of the n largest values; ties keep index order (torch.sort(stable=True)).
std::vector<int64_t> top(const std::vector<float>& x, int64_t n);

}  // namespace etspec
