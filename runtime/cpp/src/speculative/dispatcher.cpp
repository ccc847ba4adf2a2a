#include "speculative/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "nlohmann/json.hpp"
#include "speculative/dynamic_tree.h"
#include "speculative/static_tree.h"

namespace etspec {
namespace {

bool is_chain(const TreeShape& shape) { return dynamic_cast<const ChainShape*>(&shape) != nullptr; }

}  // namespace

void StepRecord::decay(double factor) {
  steps *= factor;
  tokens *= factor;
  squares *= factor;
}

void StepRecord::cap(double at_most) {
  if (steps > at_most) decay(at_most / steps);
}

void StepRecord::add(int64_t emitted) {
  steps += 1;
  tokens += emitted;
  squares += emitted * emitted;
  ++runs;
}

std::optional<double> StepRecord::upper(double z) const {
  if (steps <= 0) return std::nullopt;
  const double mean = tokens / steps;
  const double spread = std::max(squares - steps * mean * mean, 0.0);
  const double var = (spread + 2.0) / (steps + 1);
  return mean + z * std::sqrt(var / steps);
}

void DepthAcceptance::decay(double factor) {
  for (size_t d = 0; d < reached.size(); ++d) {
    reached[d] *= factor;
    accepted[d] *= factor;
  }
}

void DepthAcceptance::cap(double steps) {
  if (!reached.empty() && reached[0] > steps) decay(steps / reached[0]);
}

void DepthAcceptance::observe(int64_t height, int64_t accepted_tokens) {
  const int64_t deepest = std::min(accepted_tokens + 1, height);
  while (static_cast<int64_t>(reached.size()) < deepest) {
    reached.push_back(0.0);
    accepted.push_back(0.0);
  }
  for (int64_t d = 0; d < deepest; ++d) {
    reached[d] += 1;
    if (d < accepted_tokens) accepted[d] += 1;
  }
}

std::vector<std::pair<double, double>> DepthAcceptance::estimates(
    int64_t length, const DepthAcceptance* prior, bool seen) const {
  std::vector<std::pair<double, double>> base;
  if (prior != nullptr) base = prior->estimates(length, nullptr, seen);
  std::vector<std::pair<double, double>> out;
  const double weight = seen ? contract::kAutoMeanPriorSteps : 2.0;
  double above = seen ? 0.0 : 0.5;
  for (int64_t d = 0; d < length; ++d) {
    const double b = prior != nullptr ? base[d].first : above;
    const bool seen = d < static_cast<int64_t>(reached.size());
    const double n = seen ? reached[d] : 0.0, a = seen ? accepted[d] : 0.0;
    above = (a + weight * b) / (n + weight);
    out.emplace_back(above, n);
  }
  return out;
}

std::pair<double, double> DepthAcceptance::conditional(int64_t depth,
                                                       const DepthAcceptance* prior) const {
  return estimates(depth, prior).back();
}

double DepthAcceptance::tokens(int64_t length, double z, const DepthAcceptance* prior,
                               bool seen) const {
  std::vector<double> probs, counts;
  for (const auto& [p, n] : estimates(length, prior, seen)) {
    probs.push_back(p);
    counts.push_back(n);
  }
  std::vector<double> reach{1.0};
  for (double p : probs) reach.push_back(reach.back() * p);
  double total = 0;
  for (double r : reach) total += r;
  if (z == 0) return total;
  double var = 0, tail = 0;
  for (int64_t d = length; d > 0; --d) {
    tail += reach[d];  // tokens that depth d's acceptance multiplies
    const double p = probs[d - 1];
    const double g = tail / p;
    var += g * g * p * (1 - p) / (counts[d - 1] + 2);
  }
  return std::min(length + 1.0, total + z * std::sqrt(var));
}

Dispatcher::Dispatcher(std::vector<std::unique_ptr<TreeShape>> shapes,
                       std::vector<int64_t> widths, bool decode, bool lookup)
    : nothing_(std::make_unique<NoDraftShape>()),
      widths_(std::move(widths)),
      decode_(decode),
      lookup_(lookup),
      model_(widths_) {
  for (auto& s : shapes) {
    if (s->max_nodes) shapes_.push_back(std::move(s));
  }
  if (shapes_.empty() && !lookup_) throw Error(message("auto_no_candidates", {}));
  std::sort(widths_.begin(), widths_.end());
  for (const auto& s : shapes_) {
    if (is_chain(*s)) continue;
    trees_[s->name];
    // Before its first step, the tree's height (a static tree's first branch is its
    // deepest, most often).
    branch_[s->name] = s->max_height;
  }
}

std::vector<const TreeShape*> Dispatcher::candidates() const {
  std::vector<const TreeShape*> out;
  if (decode_) out.push_back(nothing_.get());
  for (const auto& s : shapes_) out.push_back(s.get());
  return out;
}

Choice Dispatcher::choose(const Offer* offer, int64_t height) {
  const bool offered = lookup_ && offer != nullptr && !offer->tokens.empty();
  if (settled_ > 0 && !offered) {  // dispatcher.py: settled steps decode unrated
    --settled_;
    probing_ = 0;
    return {nothing_.get(), 0};
  }
  settled_ = 0;
  ++rated_;
  const StepCosts& costs = model_.costs();
  const double z = contract::kAutoZ;
  const DepthAcceptance none;
  // The best way by optimism (`best`) and by its mean alone (`sure`).
  bool any = false;
  double best_rate = 0, best_mean = 0, sure_rate = 0;
  double rival = 0;  // the best optimistic rate of a way that drafts
  Choice best, sure;
  const auto take = [&](double rate, double mean_rate, Choice choice, bool ties) {
    if (!choice.decodes()) rival = std::max(rival, rate);
    if (!any || rate > best_rate || (ties && rate >= best_rate)) {
      best_rate = rate;
      best_mean = mean_rate;
      best = choice;
    }
    if (!any || mean_rate > sure_rate || (ties && mean_rate >= sure_rate)) {
      sure_rate = mean_rate;
      sure = choice;
    }
    any = true;
  };
  if (decode_) {
    const double rate = 1.0 / costs.predict(*nothing_, widths_);
    take(rate, rate, {nothing_.get(), 0}, false);
  }
  for (const auto& s : shapes_) {
    double tokens, mean, seconds;
    int64_t deepest = s->max_height;
    if (is_chain(*s)) {
      // The budget's last tokens: a chain grows what is left (a shorter chain, also a
      // candidate, then ties with it and comes first).
      deepest = std::min(s->max_height, height);
      // Each depth drawn toward the pooled estimate itself (dispatcher.py choose).
      tokens = chains_.tokens(deepest, z, &chains_);
      // Its mean is what was seen (kAutoMeanPriorSteps): a draft never seen to agree is
      // never sure to pay, so its steps are probes the account charges. (A lookup's keeps
      // the even prior: it runs no draft, and a wrong one costs a few rows.)
      mean = chains_.tokens(deepest, 0.0, &chains_, true);
      seconds = costs.predict_chain(deepest, widths_);
    } else {
      std::tie(tokens, mean) = tree_tokens(*s, height, z);
      seconds = costs.predict(*s, widths_);
    }
    take(std::min(tokens, deepest + 1.0) / seconds, std::min(mean, deepest + 1.0) / seconds,
         {s.get(), 0}, false);
  }
  if (lookup_ && offer != nullptr && !offer->tokens.empty()) {
    const auto seen_it = evidence_.find(offer->evidence);
    const DepthAcceptance& seen = seen_it == evidence_.end() ? none : seen_it->second;
    const int64_t longest =
        std::min({static_cast<int64_t>(offer->tokens.size()), height, widths_.back() - 1});
    for (int64_t m = 1; m <= longest; ++m) {
      const double seconds = costs.predict_chain(m, widths_, false);
      // Ties go to the lookup: it costs no draft call.
      take(seen.tokens(m, z) / seconds, seen.tokens(m, 0.0) / seconds, {nothing_.get(), m},
           true);
    }
  }
  if (!any) return {nothing_.get(), 0};  // a lookup-only drafter with nothing to offer
  probing_ = 0;
  if (best_mean < sure_rate) {
    // A probe: it runs only while the probe account is not in debt, and what it loses
    // against the best mean rate is charged to it (observe).
    if (credit_ < 0) return sure;
    probing_ = sure_rate;
  } else if (best.decodes()) {
    // Settled: a rival's rating gains at most kAutoSettledDrift of the decode's a step.
    const double lead = (1.0 - rival / best_rate) / contract::kAutoSettledDrift;
    settled_ = std::min(contract::kAutoSettledSteps, static_cast<long>(lead));
  }
  return best;
}

void Dispatcher::use_costs(const StepCosts& costs) { model_.add_probe(costs); }

void Dispatcher::decay_all(double factor) {
  chains_.decay(factor);
  for (auto& [_, acc] : evidence_) acc.decay(factor);
  for (auto& [_, rec] : trees_) rec.decay(factor);
}

void Dispatcher::observe(const Choice& choice, const StepOutcome& step) {
  decay_all(contract::kAutoForget);
  // The probe account: every step earns kAutoProbeShare of its seconds (up to what
  // kAutoProbeCreditSteps such steps earn); a probe pays what it lost.
  // It opens full, at the first step: a runner's first request may explore.
  const double earned = contract::kAutoProbeShare * step.seconds;
  const double full = earned * contract::kAutoProbeCreditSteps;
  credit_ = opened_ ? std::min(credit_ + earned, full) : full;
  opened_ = true;
  if (probing_ > 0) {
    credit_ -= std::max(0.0, step.seconds - step.emitted() / probing_);
    probing_ = 0;
  }
  const TreeShape& shape = *choice.shape;
  if (choice.lookup) ++lookups_[choice.lookup];
  else ++runs_[shape.name];  // by name: a budget's last decode is the generator's own "none"
  const bool chain = choice.lookup || is_chain(shape);
  const int64_t nodes = chain ? step.height : shape.max_nodes;
  const int64_t deepest = chain ? step.height : shape.max_height;
  model_.observe(step_kind(nodes, deepest), step);
  // What a statistic saw before weighs less at each of its own steps (kAutoDecay).
  if (choice.lookup) {
    if (!step.evidence.empty() && step.height) {
      DepthAcceptance& seen = evidence_[step.evidence];
      seen.decay(contract::kAutoDecay);
      seen.observe(step.height, step.accepted);
    }
  } else if (is_chain(shape)) {
    if (step.height) observe_chain(step.height, step.accepted);
  } else if (trees_.count(shape.name)) {
    trees_[shape.name].decay(contract::kAutoDecay);
    trees_[shape.name].add(step.emitted() - step.main_accepted - 1);
    branch_[shape.name] = step.main_height;
    // Its first branch is the chain the draft would have drafted: chains learn from the
    // trees' steps too, so a chain that accepts as often as a tree is not left at its prior
    // once the trees have records.
    if (step.main_height) observe_chain(step.main_height, step.main_accepted);
  }
}

std::pair<double, double> Dispatcher::tree_tokens(const TreeShape& shape,
                                                  int64_t height, double z) const {
  const StepRecord& rec = trees_.at(shape.name);
  const int64_t branch = std::min(branch_.at(shape.name), height);
  const double chain = branch ? chains_.tokens(branch, z, &chains_) : 1.0;
  const double chain_mean = branch ? chains_.tokens(branch, 0.0, &chains_, true) : 1.0;
  const std::optional<double> upper = rec.upper(z);
  if (!upper) return {shape.max_height + 1.0, chain_mean};
  return {chain + *upper, chain_mean + rec.tokens / rec.steps};
}

void Dispatcher::observe_chain(int64_t height, int64_t accepted) {
  chains_.decay(contract::kAutoDecay);
  chains_.observe(height, accepted);
}

void Dispatcher::shadow(const Offer& offer, const int64_t* first, int64_t emitted) {
  // The offer scored against what the step emitted, as if verified (dispatcher.py shadow).
  if (!lookup_ || offer.tokens.empty() || emitted <= 0) return;
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(offer.tokens.size()), emitted);
  int64_t matched = 0;
  while (matched < n && offer.tokens[matched] == first[matched]) ++matched;
  // No kAutoDecay here: the offer's own verifies' deeper depths would fade (dispatcher.py).
  evidence_[offer.evidence].observe(matched < n ? matched + 1 : matched, matched);
}

double Dispatcher::estimate(const TreeShape& shape) {
  const StepCosts& costs = model_.costs();
  if (!shape.max_nodes) return 1.0 / costs.predict(shape, widths_);
  double tokens;
  if (is_chain(shape)) {
    tokens = chains_.tokens(shape.max_height);
  } else {
    // Its first branch's chain plus what the other branches added (dispatcher.py).
    const StepRecord& rec = trees_.at(shape.name);
    const int64_t branch = branch_.at(shape.name);
    tokens = (branch ? chains_.tokens(branch) : 1.0) + (rec.steps > 0 ? rec.tokens / rec.steps : 0.0);
  }
  return tokens / costs.predict(shape, widths_);
}

std::string Dispatcher::report() {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();  // in candidates() order
  const bool ready = model_.ready();
  for (const TreeShape* s : candidates()) {
    const auto run = runs_.find(s->name);
    out[s->name] = {{"steps", run == runs_.end() ? 0 : run->second},
                    {"estimated_tokens_per_s", ready ? estimate(*s) : 0.0},
                    {"predicted_step_s", ready ? model_.costs().predict(*s, widths_) : 0.0}};
  }
  for (const auto& [length, steps] : lookups_) {
    out["lookup" + std::to_string(length)] = {{"steps", steps}};
  }
  return out.dump();
}

std::vector<std::unique_ptr<TreeShape>> auto_candidates(const TargetMetadata& target,
                                                        bool branching) {
  // No trees on a recipe that quantizes activations per row (contract.ROW_QUANTIZED_DTYPES):
  // a tree's other column order can flip a greedy token there.
  branching = branching && !target.row_quantized();
  std::vector<std::unique_ptr<TreeShape>> shapes;
  auto add = [&](std::unique_ptr<TreeShape> s) {
    for (const auto& have : shapes) {
      if (have->name == s->name) return;
    }
    shapes.push_back(std::move(s));
  };
  // Every chain length is cheap to consider: they pool their acceptance (DepthAcceptance).
  const int64_t longest = std::min<int64_t>(target.verify_width - 1, contract::kAutoMaxChain);
  for (int64_t n = 1; n <= longest; ++n) add(std::make_unique<ChainShape>(n));
  for (int64_t w : target.verify_widths) {
    if (branching && w >= 4) add(std::make_unique<StaticTree>(StaticTree::pruned(w - 1)));
    if (branching && w >= 8) {
      add(std::make_unique<DynamicTree>(contract::default_dynamic_depth(w),
                                        contract::kDefaultDynamicTopk, w));
    }
  }
  return shapes;
}

}  // namespace etspec
