// Static trees (runtime/speculative/static_tree.py): rank paths filled with the draft's top
// tokens, level by level.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "speculative/shapes.h"

namespace etspec {

class StaticTree : public TreeShape {
 public:
  // "D3xBF2" (full tree), "N8" (the 8 nodes of highest prior acceptance), or a JSON list of
  // rank paths such as [[0],[1],[0,0]]; the names and nodes of the Python runtime's.
  static StaticTree parse(const std::string& spec);
  static StaticTree full(int64_t depth, int64_t branching);
  static StaticTree pruned(int64_t nodes);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override;

 private:
  StaticTree(std::vector<std::vector<int64_t>> paths, std::string name);
  std::vector<std::vector<int64_t>> paths_;  // by (length, path)
};

}  // namespace etspec
