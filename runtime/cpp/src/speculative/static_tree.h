// Static trees (runtime/speculative/static_tree.py): rank paths filled with the draft's top
// tokens, level by level.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "speculative/shapes.h"

namespace etspec {

class StaticTree : public TreeShape {
 public:
  // "D3xBF2" (full tree), "N8" (the 8 nodes of highest prior acceptance), or a JSON list of
  // rank paths such as [[0],[1],[0,0]]; the names and nodes of the Python runtime's.
  // With `width`, a tree a width-row verify cannot hold is refused from its description,
  // before it is built (D12xBF12 would be 9.7 trillion paths).
  static StaticTree parse(const std::string& spec, std::optional<int64_t> width = std::nullopt);
  static StaticTree full(int64_t depth, int64_t branching,
                         std::optional<int64_t> width = std::nullopt);
  static StaticTree pruned(int64_t nodes, std::optional<int64_t> width = std::nullopt);
  Proposal grow(Expander& expansion, int64_t max_height, Sampler& sampler) const override;

 private:
  StaticTree(std::vector<std::vector<int64_t>> paths, std::string name);
  std::vector<std::vector<int64_t>> paths_;  // by (length, path)
};

}  // namespace etspec
