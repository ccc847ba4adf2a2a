// Tree shapes (runtime/speculative/shapes.py): how a proposal grows, independent of which
// draft model grows it. A shape is an algorithm over an Expander (the draft model seen as
// "the root's children" plus "feed these nodes, get their children", batched per level)
// and yields a Proposal: draft nodes 1..M in BFS order, each with a parent in [0, i).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  // Of the calls, the catch-up that started the proposal (fed what the target committed
  // since the last one) and its seconds: the cost model prices it apart from the levels.
  int64_t extend_calls = 0;
  double extend_s = 0;
};

// A proposal a drafter has at no model call (prompt lookup's match): the chain's tokens
// and how they were found ("ngram3"), which the dispatcher judges it by.
struct Offer {
  std::vector<int64_t> tokens;
  std::string evidence;
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
  // The committed length: the root's index in the sequence (a node at depth d is the token
  // at index position + d).
  int64_t position = 0;
};

// What one speculative step did, as a tree policy learns it (runtime/speculative/step.py).
struct StepOutcome {
  int64_t height = 0;    // depth of the deepest drafted node (0: nothing was drafted)
  int64_t accepted = 0;  // draft tokens accepted (the step emitted one more)
  double seconds = 0;    // wall time of the step: draft, verify (or decode), accept, commit
  // How deep the step could have drafted (its shape, capped by the token budget). -1: height.
  int64_t allowed = -1;
  std::string evidence;  // the offer's, when the step verified it
  // What the step's calls took: the verify's (or the decode's) seconds and rows (1: a
  // decode), and the draft's seconds over its model calls.
  double target_s = 0;
  int64_t rows = 0;
  double draft_s = 0;
  int64_t draft_calls = 0;
  double extend_s = 0;  // of those, the catch-up's (Proposal::extend_s)
  int64_t extend_calls = 0;
  // A tree's first branch (from the root, each node's first child: the chain of the draft's
  // top-ranked tokens, which a chain step of that length would have drafted): how deep it went
  // and how many of its tokens the step accepted. 0 for a chain or a lookup.
  int64_t main_height = 0;
  int64_t main_accepted = 0;
  int64_t emitted() const { return accepted + 1; }
};

class TreeShape;
struct StepCosts;

// What one step runs: the model drafter's `shape` or, with `lookup` > 0, the first
// `lookup` tokens of the drafter's offer instead (`shape` then drafts nothing).
struct Choice {
  const TreeShape* shape = nullptr;
  int64_t lookup = 0;
  // Nothing is proposed: the step is one target decode.
  bool decodes() const;
};

// Chooses what each speculative step runs (a fixed shape, or the dispatcher,
// speculative/dispatcher.h).
class TreePolicy {
 public:
  virtual ~TreePolicy() = default;
  // Every shape this policy may choose (checked against the artifacts up front).
  virtual std::vector<const TreeShape*> candidates() const = 0;
  // What the next step runs, at most `height` levels deep, given the drafter's offer
  // (nullptr: none; asked for only when takes_offers()).
  virtual Choice choose(const Offer* offer, int64_t height) = 0;
  virtual bool takes_offers() const { return false; }
  // A request starts (the dispatcher weighs what earlier ones taught less).
  virtual void begin() {}
  virtual void observe(const Choice& choice, const StepOutcome& step) {}
  // After a step that did not verify `offer`: the tokens it emitted (`emitted` of them,
  // at `first`), which say what the offer would have accepted (dispatcher.py shadow).
  virtual void shadow(const Offer& offer, const int64_t* first, int64_t emitted) {}
  // Whether the generator should measure the step costs (speculative/costs.h
  // measure_costs) and hand them over before the next step (a fixed shape never needs them).
  virtual bool needs_costs() const { return false; }
  virtual void use_costs(const StepCosts& costs) {}
  // What it measured per candidate, as a JSON object (dispatcher.py report); "" for none.
  virtual std::string report() { return ""; }
};

// A fixed shape; as a policy it always picks itself.
class TreeShape : public TreePolicy {
 public:
  // The proposal of one step, at most `max_height` levels deep.
  virtual Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const = 0;
  std::vector<const TreeShape*> candidates() const override { return {this}; }
  Choice choose(const Offer*, int64_t) override { return {this, 0}; }
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
