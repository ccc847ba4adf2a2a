// runtime/speculative/dispatcher.py: the dispatcher (--tree auto), one choice per step among
// every way the step can go: a plain decode (no draft work), the drafter's offer (prompt
// lookup's match, cut to its best prefix, judged by the acceptance seen under the same
// evidence) and each model shape (chains pooled by depth, whatever the lookup offered;
// trees on their own steps). Each is rated by its optimistic tokens per
// step (contract::kAutoZ standard errors over the mean) over its predicted seconds
// (speculative/costs.h CostModel), and the best runs (a probe, best on optimism but not on its
// mean, only while probes have lost at most contract::kAutoProbeShare); what was seen decays by
// contract::kAutoDecay a step. The same arithmetic as the Python class, in the same order: on
// the same recorded outcomes both choose the same way at every step
// (tests/runtime/cpp/test_cpp_dispatcher.py).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/costs.h"
#include "speculative/shapes.h"

namespace etspec {

// Tokens emitted per step by one shape; counts decay.
struct StepRecord {
  double steps = 0, tokens = 0, squares = 0;
  int64_t runs = 0;  // steps run, undecayed
  void decay(double factor);
  // Scale the counts to at most `at_most` steps (the mean and spread kept).
  void cap(double at_most);
  void add(int64_t emitted);
  // Mean tokens per step plus z standard errors (a prior of one token squared worth two
  // steps); nullopt: no steps.
  std::optional<double> upper(double z) const;
};

// Chain acceptance by depth, pooled over every chain step of any length; counts decay.
struct DepthAcceptance {
  std::vector<double> reached, accepted;
  void decay(double factor);
  // Scale the counts so at most `steps` steps reached depth 1 (the acceptance kept).
  void cap(double steps);
  void observe(int64_t height, int64_t accepted_tokens);
  // (P(depth d accepted | all shallower accepted), its count) for d = 1..length, each with a
  // prior worth two steps: prior's estimate at the depth when given, else this one's at the
  // shallower depth (one accept and one reject at depth 1). `seen`: what was seen, the prior
  // worth kAutoMeanPriorSteps and none at depth 1 (a chain's mean).
  std::vector<std::pair<double, double>> estimates(int64_t length,
                                                   const DepthAcceptance* prior = nullptr,
                                                   bool seen = false) const;
  std::pair<double, double> conditional(int64_t depth, const DepthAcceptance* prior = nullptr) const;
  // Mean tokens a chain of `length` emits per step plus z standard errors (the delta method).
  double tokens(int64_t length, double z = 0, const DepthAcceptance* prior = nullptr,
                bool seen = false) const;
};

class Dispatcher : public TreePolicy {
 public:
  // Over `shapes` (the model's; none for a drafter without one), the step that drafts
  // nothing (`decode`) and the drafter's offers (`lookup`).
  Dispatcher(std::vector<std::unique_ptr<TreeShape>> shapes, std::vector<int64_t> widths,
             bool decode, bool lookup);
  std::vector<const TreeShape*> candidates() const override;
  Choice choose(const Offer* offer, int64_t height) override;
  bool takes_offers() const override { return lookup_; }
  void begin() override {
    decay_all(contract::kAutoRequestDecay);
    chains_.cap(contract::kAutoRequestPriorSteps);
    for (auto& [_, seen] : evidence_) seen.cap(contract::kAutoRequestPriorSteps);
    for (auto& [_, rec] : trees_) rec.cap(contract::kAutoRequestPriorSteps);
    settled_ = 0;
  }
  void observe(const Choice& choice, const StepOutcome& step) override;
  void shadow(const Offer& offer, const int64_t* first, int64_t emitted) override;
  // Once: a call no step made for long costs its probe time scaled (CostModel).
  bool needs_costs() const override { return !model_.ready(); }
  void use_costs(const StepCosts& costs) override;

  double estimate(const TreeShape& shape);  // expected tokens/s (no optimism)
  // Per candidate: steps run, estimated tokens/s and predicted step seconds; per lookup
  // length run, its steps (dispatcher.py report, the same keys).
  std::string report() override;
  long rated() const { return rated_; }      // steps whose ways were rated (not settled)
  const StepCosts& costs() { return model_.costs(); }

 private:
  void decay_all(double factor);
  void observe_chain(int64_t height, int64_t accepted);  // chain acceptance, pooled
  // (Optimistic, mean) tokens per step of a tree: its first branch's chain figures (at most
  // `height` deep) plus what its other branches added (dispatcher.py).
  std::pair<double, double> tree_tokens(const TreeShape& shape, int64_t height, double z) const;

  std::vector<std::unique_ptr<TreeShape>> shapes_;
  std::unique_ptr<TreeShape> nothing_;
  std::vector<int64_t> widths_;
  bool decode_, lookup_;
  CostModel model_;
  DepthAcceptance chains_;  // pooled, whatever the lookup offered (dispatcher.py chains)
  std::map<std::string, StepRecord> trees_;     // tokens beyond the first branch's
  std::map<std::string, int64_t> branch_;       // how deep its first branch last went
  std::map<std::string, DepthAcceptance> evidence_;  // the lookup's, per evidence
  double credit_ = 0;    // the probe account (contract::kAutoProbeShare), seconds
  bool opened_ = false;  // a step was observed (the account opens full)
  double probing_ = 0;  // the last choice was a probe: the best mean rate (0: it was not)
  long settled_ = 0;    // steps left that decode unrated (contract::kAutoSettledDrift)
  long rated_ = 0;
  std::map<std::string, int64_t> runs_;  // steps per shape name, for reports
  std::map<int64_t, int64_t> lookups_;        // steps per lookup length, for reports
};

// --tree auto's model shapes (settings.auto_candidates): chains of 1..kAutoMaxChain that
// fit and, for drafts that branch, static and dynamic trees filling each verify width.
std::vector<std::unique_ptr<TreeShape>> auto_candidates(const TargetMetadata& target,
                                                        bool branching);

}  // namespace etspec
