#include "speculative/tree.h"

#include <algorithm>

#include "artifact.h"

namespace etspec {

DraftTree DraftTree::build(int64_t root, const Proposal& proposal) {
  const int64_t m1 = proposal.tokens.size() + 1;
  DraftTree tree;
  tree.tokens.assign(m1, root);
  tree.parents.assign(m1, 0);
  tree.depth.assign(m1, 0);
  tree.children.resize(m1);
  for (int64_t i = 1; i < m1; ++i) {
    const int64_t parent = proposal.parents[i - 1];
    if (parent < 0 || parent >= i) throw Error("draft tree parent out of order");
    tree.tokens[i] = proposal.tokens[i - 1];
    tree.parents[i] = parent;
    tree.depth[i] = tree.depth[parent] + 1;
    tree.max_depth = std::max(tree.max_depth, tree.depth[i]);
    tree.children[parent].push_back(i);
  }
  return tree;
}

std::pair<int64_t, int64_t> DraftTree::first_branch(const std::vector<int64_t>& path) const {
  int64_t row = 0, height = 0, accepted = 0;
  while (!children[row].empty()) {
    row = children[row][0];
    ++height;
    if (accepted == height - 1 && height < static_cast<int64_t>(path.size()) &&
        path[height] == row) {
      accepted = height;
    }
  }
  return {height, accepted};
}

}  // namespace etspec
