// runtime/speculative/dispatcher.py: the tree-budget dispatcher (--tree auto). It picks the
// shape that emits the most tokens per second on this artifact and this machine:
// - costs are measured before the first step (speculative/costs.h) and give each candidate
//   a predicted step time; they are measured again at the step that reaches
//   contract::kAutoRemeasureAfter steps (the first measurement runs in a cold process);
// - acceptance is observed: chains pool theirs by depth (DepthAcceptance), so a step of any
//   chain informs every chain length; trees are judged on their own steps;
// - each step runs the candidate with the highest upper confidence bound of tokens/s; a
//   chain's bound is its mean tokens plus each depth's doubt weighted by the share of
//   steps that reach that depth (unreached depths borrow the deepest reached one's rate);
// - a chain whose drafter says how it was found (Proposal::evidence: prompt lookup's matched
//   n-gram length) is cut to the prefix with the most tokens/s (trim), by the acceptance
//   seen under the same evidence; once a drafter has given evidence, the longest chain
//   stands for every chain and for drafting nothing (a cut reaches any of them).
// The same arithmetic as the Python class, in the same order: on the same recorded costs
// and outcomes both choose the same shapes (tests/runtime/cpp/test_cpp_dispatcher.py).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/costs.h"
#include "speculative/shapes.h"

namespace etspec {

// Steps, tokens (and their squares) and seconds of the steps one candidate ran.
struct StepRecord {
  int64_t steps = 0, tokens = 0, squares = 0;
  double seconds = 0;
  void add(int64_t emitted, double step_seconds);
  // Standard error of the mean tokens per step, with a prior of one token squared worth
  // two steps (a few identical steps do not look certain).
  double standard_error() const;
  double rate() const { return seconds > 0 ? tokens / seconds : 0.0; }
  double step_s() const { return steps ? seconds / steps : 0.0; }
};

// Chain acceptance by depth, pooled over every chain step of any length.
struct DepthAcceptance {
  std::vector<int64_t> reached, accepted;
  // allowed: how deep the step could have drafted; -1 when it drafted all it could.
  void observe(int64_t height, int64_t accepted_tokens, int64_t allowed = -1);
  // P(depth accepted | all shallower accepted), a Laplace prior; unseen depths borrow the
  // deepest seen one.
  double conditional(int64_t depth) const;
  // Upper confidence bounds of depths 1..length, each estimated with a prior of two steps
  // at the shallower depth's estimate (depth 1: one accept, one reject) plus z standard
  // errors (what trim reads; dispatcher.py).
  std::vector<double> borrowed_upper(int64_t length, double z) const;
  // Mean tokens a chain of `length` emits per step (accepted + the bonus); with z, its
  // upper confidence bound: z standard errors over the mean, each depth's error carried to
  // the tokens by the share of steps that reach it (the delta method; dispatcher.py).
  double expected_tokens(int64_t length, std::optional<double> z = std::nullopt) const;
};

class AutoTree : public TreePolicy {
 public:
  AutoTree(std::vector<std::unique_ptr<TreeShape>> shapes, std::vector<int64_t> widths);
  // Over shapes another policy owns (which outlives this one).
  AutoTree(std::vector<const TreeShape*> shapes, std::vector<int64_t> widths);
  std::vector<const TreeShape*> candidates() const override;
  const TreeShape& choose() override;
  void observe(const TreeShape& shape, const StepOutcome& step) override;
  // The prefix of an `offered`-token chain with the highest tokens/s: each depth's
  // acceptance under this evidence counted contract::kAutoTrimZ standard errors
  // optimistic, over the predicted seconds of a chain that long (0: a plain decode); the
  // shortest of equal prefixes wins.
  int64_t trim(const TreeShape& shape, int64_t offered, const std::string& evidence) override;
  bool needs_costs() const override;
  void use_costs(const StepCosts& costs) override;
  // A SeededAutoTree over the same shapes for a seeded sampling request, else nullptr.
  std::unique_ptr<TreePolicy> for_request(const Sampler& sampler) const override;

  double estimate(const TreeShape& shape) const;     // expected tokens/s (0: no data)
  double upper_bound(const TreeShape& shape) const;  // the UCB choose() maximizes

 protected:
  // Predicted seconds of the step as it ran: a chain that drafted fewer tokens than its
  // length (a short lookup match, a cut) verified a narrower tree.
  double ran_seconds(const TreeShape& shape, const StepOutcome& step) const;
  std::optional<StepCosts> costs_;
  std::vector<int64_t> widths_;

 private:
  double overhead(const TreeShape& shape) const;
  double predicted_seconds(const TreeShape& shape) const;

  double blend(const TreeShape& shape, double prior) const;
  double step_seconds(const TreeShape& shape) const;
  double optimistic_rate(const TreeShape& shape) const;
  // Mean tokens per step or, with z, its upper confidence bound (nullopt: no data yet).
  std::optional<double> tokens(const TreeShape& shape,
                               std::optional<double> z = std::nullopt) const;

  std::vector<std::unique_ptr<TreeShape>> owned_;
  std::vector<const TreeShape*> shapes_;
  std::map<std::string, StepRecord> records_;
  DepthAcceptance chains_;
  StepRecord chain_steps_;
  std::map<std::string, DepthAcceptance> evidence_;  // chain acceptance per evidence (trim)
  int64_t total_ = 0, decided_ = 0;
  const TreeShape* current_ = nullptr;
  bool remeasured_ = false;
  // Recent measured-minus-predicted step seconds of chain (true) and tree (false) steps.
  std::map<bool, std::deque<double>> extra_{{true, {}}, {false, {}}};
};

// --tree auto for one seeded sampling request: the same choice rule, priced by fixed costs
// (costs.h fixed_costs) and fed each step's predicted time instead of its measured one, so
// the shapes the request runs, and with them its random stream, follow from the seed, the
// prompt and the acceptance alone: the same ids on every run. A fresh one serves each
// request (AutoTree::for_request).
class SeededAutoTree : public AutoTree {
 public:
  SeededAutoTree(std::vector<const TreeShape*> shapes, std::vector<int64_t> widths);
  bool needs_costs() const override { return false; }
  void observe(const TreeShape& shape, const StepOutcome& step) override;
};

// --tree auto's candidates (settings.auto_candidates): chains of 2..7 that fit and, for
// drafts that branch, static and dynamic trees filling each verify width.
std::vector<std::unique_ptr<TreeShape>> auto_candidates(const TargetMetadata& target,
                                                        bool branching);

}  // namespace etspec
