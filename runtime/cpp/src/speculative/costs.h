// runtime/speculative/costs.py: what one speculative step costs on this machine, measured
// (--tree auto's cost model). The target's verify widths are timed here; each draft runner
// times its own calls (SpeculativeDraftRunner::step_costs) with the probe handed to it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "masks.h"
#include "program.h"
#include "speculative/shapes.h"

namespace etspec {

class SpeculativeDraftRunner;

// Seconds of one draft call per tree level (`step_s`, `step_width` rows each) and of the
// per-step call that starts a proposal (`extend_s`); zero for a drafter with no model.
struct DraftCosts {
  int64_t step_width = 1;
  double step_s = 0, extend_s = 0;
};

// Seconds per call of the methods a step runs (measured by the cost probe, or a
// CostModel's estimates now) and of the host work beside them per kind of step (step_kind).
struct StepCosts {
  std::map<int64_t, double> verify_s;  // per compiled verify width
  double draft_s = 0;                  // one draft level call of a chain (a link)
  int64_t step_width = 1;              // draft rows one call feeds
  double decode_s = 0;                 // one target_decode (a step that drafts nothing)
  std::map<std::string, double> overhead_s;  // per step kind, and per kind and width (host_key)
  // The catch-up that starts a proposal (0: a level call's) and one level call of a tree
  // (0: a chain's), priced apart (step.py StepCosts).
  double extend_s = 0, tree_level_s = 0;
  // Seconds of one step of `shape`; `model` false: its nodes cost no draft call (a lookup's
  // chain).
  double predict(const TreeShape& shape, const std::vector<int64_t>& widths,
                 bool model = true) const;
  // predict() of a chain of `length` draft tokens (0: a step that drafts nothing).
  double predict_chain(int64_t length, const std::vector<int64_t>& widths,
                       bool model = true) const;
};

// "decode" (nothing verified), "chain" (one node per level) or "tree".
const char* step_kind(int64_t max_nodes, int64_t max_height);

// The key of a kind of step's host work at one verify width (step.py host_key).
std::string host_key(const std::string& kind, int64_t width);

// Keys of the calls a step makes (CostModel): "decode", "draft", "extend" and "verify<w>".
extern const char* const kDecodeCall;
extern const char* const kDraftCall;
extern const char* const kExtendCall;
std::string verify_key(int64_t width);

// What each method call and each kind of step's host work costs now (costs.py CostModel):
// a call's cost is the median of its last contract::kAutoCostWindow calls by steps once it
// has contract::kAutoCostMinCalls of them, before that the probe's time scaled as the
// target's observed calls compare with their own probe times; a call's time counts for
// contract::kAutoStaleSteps steps (a width no longer chosen is priced from its probe again,
// not by the few calls it had when it was dropped), with no program call.
class CostModel {
 public:
  explicit CostModel(std::vector<int64_t> widths, int64_t step_width = 1);
  void add_probe(const StepCosts& probe);
  void observe(const std::string& kind, const StepOutcome& step);
  bool ready() const;
  const StepCosts& costs();

 private:
  void observe_call(const std::string& key, double seconds);
  void forget_stale();  // call times taken kAutoStaleSteps steps ago or more stop counting
  std::optional<double> call(const std::string& key, double scale) const;
  size_t evidence(const std::string& key) const;  // own step calls pricing it (0: the probe)
  double scale() const;

  std::vector<int64_t> widths_;
  int64_t step_width_;
  // overhead_ and levels_ (a tree's level calls, apart from a chain's) per kind of step.
  std::map<std::string, std::deque<double>> calls_, overhead_, levels_;
  std::map<std::string, double> probe_;
  std::map<std::string, std::deque<int64_t>> calls_at_;  // the step each call was made at
  std::map<std::string, int64_t> overhead_seen_;
  int64_t steps_ = 0;
  std::optional<StepCosts> costs_;
};

// `prices` (by rows, ascending) made never to fall as rows grow, each conflict settled by
// the price with more step calls behind it, a tie by the narrower's (costs.py ordered).
std::vector<double> ordered(const std::vector<double>& prices, const std::vector<size_t>& evidence);

// Times program calls on scratch slots only (nothing committed is touched), with masks as
// wide as a `context`-token context needs (a call's cost grows with the context).
struct CostProbe {
  int64_t repeats = 5;
  int64_t context = 256;
  bool warm_up = true;  // one untimed call first (a method's first call loads it)
  // The least wall time of `method` over `repeats` calls (step.py CostProbe.timed).
  double timed(Program& program, const std::string& method,
               const std::vector<executorch::extension::TensorPtr>& inputs) const;
  // Rows 0..width-1 in scratch slots: tokens (row % 2), positions, slots, a mask showing
  // each row only itself (`columns` wide), and the band (empty without sliding layers).
  struct Inputs {
    std::vector<int64_t> tokens, positions, slots, band;
    std::vector<float> mask;
    int64_t rows = 0, columns = 0;
  };
  Inputs scratch_inputs(int64_t width, const MaskLayout& layout) const;
  // A decode at `position`, the next slot to be committed (nothing committed is touched:
  // the next step writes it again), with a mask as wide as the scratch probes' showing
  // only its own slot.
  Inputs decode_inputs(int64_t position, const MaskLayout& layout) const;
};

// The least wall time of each verify width, of a decode at `position` (the next slot to be
// committed; not timed when negative) and of the draft runner's own calls, over
// probe.repeats rounds that each time every call once.
StepCosts measure_costs(TargetProgram& target, SpeculativeDraftRunner* draft,
                        int64_t position = -1, const CostProbe& probe = {});

}  // namespace etspec
