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

}  // namespace etspec
