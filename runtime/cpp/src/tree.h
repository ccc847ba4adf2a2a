// Proposal shapes (runtime/speculative/shapes.py, static_tree.py): a chain, or a static
// tree of rank paths filled with the draft's top tokens. Both grow over an Expansion and
// yield a Proposal: draft nodes 1..M in BFS order, each with a parent in [0, i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "draft.h"
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

class Shape {
 public:
  virtual ~Shape() = default;
  virtual Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler,
                        const Drafter& draft) const = 0;
  std::string name;
  int64_t max_nodes = 0;  // draft nodes verified (verify width needed: this + 1)
  int64_t fed_nodes = 0;  // nodes fed to the draft (scratch slots needed)
};

class ChainShape : public Shape {
 public:
  explicit ChainShape(int64_t length);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler,
                const Drafter& draft) const override;

 private:
  int64_t length_;
};

class StaticTree : public Shape {
 public:
  // "D3xBF2" (full tree), "N8" (the 8 nodes of highest prior acceptance), or a JSON list of
  // rank paths such as [[0],[1],[0,0]]; the names and nodes of the Python runtime's.
  static StaticTree parse(const std::string& spec);
  static StaticTree full(int64_t depth, int64_t branching);
  static StaticTree pruned(int64_t nodes);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler,
                const Drafter& draft) const override;

 private:
  StaticTree(std::vector<std::vector<int64_t>> paths, std::string name);
  std::vector<std::vector<int64_t>> paths_;  // by (length, path)
};

}  // namespace etspec
