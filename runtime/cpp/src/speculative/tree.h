// DraftTree (runtime/speculative/tree.py): a proposal tensorized for one verify. Row 0 is the
// root (the last emitted token), rows 1..M the draft nodes in BFS order; depth[i] is row i's
// distance from the root (its RoPE offset), children[i] its child rows in proposal order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "speculative/shapes.h"

namespace etspec {

struct DraftTree {
  std::vector<int64_t> tokens;   // [M + 1]: the root, then the draft tokens
  std::vector<int64_t> parents;  // [M + 1]: parents[0] = 0, parents[i] in [0, i)
  std::vector<int64_t> depth;    // [M + 1]
  std::vector<std::vector<int64_t>> children;
  int64_t max_depth = 0;

  // Refuses a proposal whose parents are not in [0, i) (a draft runner's bug).
  static DraftTree build(int64_t root, const Proposal& proposal);
  int64_t size() const { return static_cast<int64_t>(tokens.size()) - 1; }  // draft nodes
  // {How deep the first branch goes, how many of its nodes `path` (the accepted rows, root
  // first) accepted}: the branch through each row's first child, the drafter's top token, so
  // the chain a chain step would have drafted (tree.py's first_branch).
  std::pair<int64_t, int64_t> first_branch(const std::vector<int64_t>& path) const;
};

}  // namespace etspec
