#include "speculative/settings.h"

#include "speculative/dispatcher.h"
#include "speculative/dynamic_tree.h"
#include "speculative/static_tree.h"

namespace etspec {

void TreeSettings::check() const {
  if (mode != "chain" && mode != "static" && mode != "dynamic" && mode != "auto") {
    throw Error(message("unknown_choice", {{"what", "--tree"},
                                           {"value", mode},
                                           {"choices", "chain, static, dynamic, auto"}}));
  }
}

std::unique_ptr<TreePolicy> TreeSettings::policy(const TargetMetadata& target,
                                                 bool branching) const {
  check();
  const int64_t width = target.verify_width;
  if (mode == "auto") {
    return std::make_unique<AutoTree>(auto_candidates(target, branching), target.verify_widths);
  }
  if (mode == "chain") return std::make_unique<ChainShape>(num_spec_tokens);
  if (mode == "static") {
    if (static_tree) return std::make_unique<StaticTree>(StaticTree::parse(*static_tree, width));
    // The best-first pruned tree filling the widest verify (at most STATIC_TREE_MAX_NODES).
    const int64_t nodes = std::min<int64_t>(width - 1, contract::kStaticTreeMaxNodes);
    return std::make_unique<StaticTree>(StaticTree::pruned(std::max<int64_t>(1, nodes)));
  }
  // The default dynamic tree fills the widest verify; each knob given replaces its default.
  return std::make_unique<DynamicTree>(depth.value_or(contract::default_dynamic_depth(width)),
                                       topk.value_or(contract::kDefaultDynamicTopk),
                                       total_tokens.value_or(width));
}

}  // namespace etspec
