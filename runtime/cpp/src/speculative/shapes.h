// Tree shapes (runtime/speculative/shapes.py): how a proposal grows, independent of which
// draft model grows it. A shape is an algorithm over an Expander (the draft model seen as
// "the root's children" plus "feed these nodes, get their children", batched per level)
// and yields a Proposal: draft nodes 1..M in BFS order, each with a parent in [0, i).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sampler.h"

namespace etspec {

struct Proposal {
  std::vector<int64_t> tokens;   // target-vocabulary ids of nodes 1..M
  std::vector<int64_t> parents;  // parents[i - 1] of node i, in [0, i)
  // q[i - 1]: the distribution (target ids) node i was drawn from (sampled chains); empty:
  // every node is a deterministic pick (a point mass for the verifier).
  std::vector<TokenDist> q;
  int64_t calls = 0;
  // What proposed the nodes when it was not the step's shape (a combined drafter's prompt
  // lookup): the step then says nothing about the shape; its statistics go under the label.
  std::string label;
  // How a chain was found, when the drafter can tell (prompt lookup: "ngram3"); --tree auto
  // judges each kind on its own acceptance and cuts the ones that do not pay. Empty: none.
  std::string evidence;
  // The first n nodes of a chain.
  Proposal prefix(int64_t n) const;
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

// What one speculative step did, as a tree policy learns it.
struct StepOutcome {
  int64_t height = 0;    // depth of the deepest drafted node (0: nothing was drafted)
  int64_t accepted = 0;  // draft tokens accepted (the step emitted one more)
  double seconds = 0;    // wall time of the step: draft, verify, accept, commit
  // How deep the step could have drafted (its shape, capped by the token budget); a drafter
  // that offered less (prompt lookup's match ran out) ended the chain itself. -1: height.
  int64_t allowed = -1;
  // False when the draft proposed something other than the shape asked for (a labelled
  // Proposal): the step then teaches a tree policy nothing about the shape.
  bool follows_shape = true;
  std::string evidence;  // Proposal::evidence
  int64_t emitted() const { return accepted + 1; }
};

class TreeShape;
struct StepCosts;

// Chooses the tree shape of each speculative step (a fixed shape, or --tree auto's
// dispatcher, speculative/dispatcher.h).
class TreePolicy {
 public:
  virtual ~TreePolicy() = default;
  // Every shape this policy may choose (checked against the artifacts up front).
  virtual std::vector<const TreeShape*> candidates() const = 0;
  virtual const TreeShape& choose() = 0;
  virtual void observe(const TreeShape& shape, const StepOutcome& step) {}
  // How many of the `offered` chain tokens a proposal found by `evidence` should keep; a
  // fixed shape keeps them all.
  virtual int64_t trim(const TreeShape& shape, int64_t offered, const std::string& evidence) {
    return offered;
  }
  // Whether the generator should measure the step costs (speculative/costs.h) and hand
  // them over before the next step; a fixed shape never does.
  virtual bool needs_costs() const { return false; }
  virtual void use_costs(const StepCosts& costs) {}
  // The policy one request runs under; nullptr: this one (a request must not depend on
  // what earlier requests taught it only where dispatcher.h's SeededAutoTree says).
  virtual std::unique_ptr<TreePolicy> for_request(const Sampler& sampler) const {
    return nullptr;
  }
};

// A fixed shape; as a policy it always picks itself.
class TreeShape : public TreePolicy {
 public:
  // The proposal of one step, at most `max_height` levels deep.
  virtual Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const = 0;
  std::vector<const TreeShape*> candidates() const override { return {this}; }
  const TreeShape& choose() override { return *this; }
  std::string name;
  int64_t max_nodes = 0;   // draft nodes verified (verify width needed: this + 1)
  int64_t max_height = 0;  // deepest node: the most draft tokens one step can accept
  int64_t fed_nodes = 0;   // nodes fed to the draft (scratch slots needed)
  int64_t levels = 0;      // draft expansion levels (calls, when a level fits one step width)
};

// `length` draft tokens in a line: the top-1 token of each level when greedy, a sample of
// the draft's (processed) distribution when sampling.
class ChainShape : public TreeShape {
 public:
  explicit ChainShape(int64_t length);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override;
  int64_t length() const { return length_; }

 protected:
  struct Empty {};
  explicit ChainShape(Empty) : length_(0) {}

 private:
  int64_t length_;
};

// A chain of nothing: the step decodes one token with the target alone (--tree auto's way
// not to speculate where it does not pay; runtime/speculative/shapes.py NoDraftShape).
class NoDraftShape : public ChainShape {
 public:
  NoDraftShape();
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override {
    return {};
  }
};

// Indices of the n largest values; ties keep index order (torch.sort(stable=True)).
std::vector<int64_t> top(const std::vector<float>& x, int64_t n);

}  // namespace etspec
