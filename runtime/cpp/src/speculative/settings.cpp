#include "speculative/settings.h"

#include "speculative/dispatcher.h"
#include "speculative/dynamic_tree.h"
#include "speculative/static_tree.h"

namespace etspec {

namespace {

// Whether comma-separated `owners` lists `name` (an empty list: every owner).
bool owns(const std::string& owners, const std::string& name) {
  if (owners.empty()) return true;
  for (size_t start = 0; start <= owners.size();) {
    const size_t end = std::min(owners.find(',', start), owners.size());
    if (owners.substr(start, end - start) == name) return true;
    start = end + 1;
  }
  return false;
}

std::string first(const std::string& owners) { return owners.substr(0, owners.find(',')); }

}  // namespace

const contract::RunSetting* run_setting(const std::string& flag) {
  for (const auto& row : contract::kRunSettings) {
    if (flag == row.flag) return &row;
  }
  return nullptr;
}

const contract::RunSetting* run_setting_of(const std::string& field) {
  for (const auto& row : contract::kRunSettings) {
    if (field == row.field) return &row;
  }
  return nullptr;
}

std::string method_option_names() {
  std::string names;
  for (const auto& row : contract::kRunSettings) {
    const std::string field = row.field;
    if (field.rfind("method.", 0) == 0) names += (names.empty() ? "" : ", ") + field.substr(7);
  }
  return names;
}

void check_owner(const std::string& flag, bool given, const std::string& tree_mode,
                 const std::string& draft_method) {
  const contract::RunSetting* row = run_setting(flag);
  if (!given || row == nullptr) return;
  if (!owns(row->tree_modes, tree_mode)) {
    throw Error(message("knob_needs_mode", {{"option", flag}, {"mode", first(row->tree_modes)}}));
  }
  if (!owns(row->draft_methods, draft_method)) {
    throw Error(
        message("option_needs_method", {{"option", flag}, {"owner", first(row->draft_methods)}}));
  }
}

void check_minimum(const std::string& flag, std::optional<int64_t> value) {
  const contract::RunSetting* row = run_setting(flag);
  if (!value || row == nullptr || !row->has_minimum || *value >= row->minimum) return;
  throw Error(message("setting_minimum", {{"option", flag},
                                          {"minimum", std::to_string(row->minimum)},
                                          {"value", std::to_string(*value)}}));
}

void TreeSettings::check() const {
  bool known = false;
  std::string choices;
  for (const char* m : contract::kTreeModes) {
    known = known || mode == m;
    choices += (choices.empty() ? "" : ", ") + std::string(m);
  }
  if (!known) {
    throw Error(
        message("unknown_choice", {{"what", "--tree"}, {"value", mode}, {"choices", choices}}));
  }
  if (depth && num_steps) {
    throw Error(message("knob_twice",
                        {{"first", "--depth"}, {"second", "--num-steps"}, {"knob", "depth"}}));
  }
  const std::pair<const char*, std::optional<int64_t>> knobs[] = {
      {"--num-spec-tokens", num_spec_tokens}, {"--depth", depth}, {"--num-steps", num_steps},
      {"--draft-topk", topk}, {"--total-tokens", total_tokens}};
  for (const auto& [flag, value] : knobs) check_minimum(flag, value);
  check_owner("--static-tree", static_tree.has_value(), mode, "");
  for (const auto& [flag, value] : knobs) check_owner(flag, value.has_value(), mode, "");
}

std::unique_ptr<TreeShape> TreeSettings::shape(const TargetMetadata& target) const {
  const int64_t width = target.verify_width;
  if (mode == "chain") return std::make_unique<ChainShape>(num_spec_tokens);
  if (mode == "static") {
    if (static_tree) return std::make_unique<StaticTree>(StaticTree::parse(*static_tree, width));
    // The best-first pruned tree filling the widest verify (at most STATIC_TREE_MAX_NODES).
    const int64_t nodes = std::min<int64_t>(width - 1, contract::kStaticTreeMaxNodes);
    return std::make_unique<StaticTree>(StaticTree::pruned(std::max<int64_t>(1, nodes)));
  }
  // The default dynamic tree fills the widest verify; each knob given replaces its default.
  const std::optional<int64_t> passes = num_steps ? std::optional<int64_t>(*num_steps - 1) : depth;
  return std::make_unique<DynamicTree>(passes.value_or(contract::default_dynamic_depth(width)),
                                       topk.value_or(contract::kDefaultDynamicTopk),
                                       total_tokens.value_or(width));
}

std::unique_ptr<TreePolicy> TreeSettings::policy(const TargetMetadata& target,
                                                 const SpeculativeDraftRunner& drafter) const {
  check();
  if (mode == "auto") {
    std::vector<std::unique_ptr<TreeShape>> shapes;
    if (drafter.has_model()) shapes = auto_candidates(target, drafter.branching());
    return std::make_unique<Dispatcher>(std::move(shapes), target.verify_widths, true,
                                        drafter.offers());
  }
  std::unique_ptr<TreeShape> one = shape(target);
  if (drafter.offers() && drafter.has_model()) {
    std::vector<std::unique_ptr<TreeShape>> shapes;
    shapes.push_back(std::move(one));
    return std::make_unique<Dispatcher>(std::move(shapes), target.verify_widths, false, true);
  }
  return one;
}

}  // namespace etspec
