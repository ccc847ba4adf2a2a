// runtime/speculative/costs.py: what one speculative step costs on this machine, measured
// (--tree auto's cost model). The target's verify widths are timed here; each draft runner
// times its own calls (SpeculativeDraftRunner::step_costs) with the probe handed to it.
#pragma once

#include <cstdint>
#include <map>
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

// Measured seconds per call of the methods one speculative step runs.
struct StepCosts {
  std::map<int64_t, double> verify_s;  // per compiled verify width
  double draft_step_s = 0, draft_extend_s = 0;
  int64_t step_width = 1;
  double decode_s = 0;  // one target_decode (a step that drafts nothing)
  double predict(const TreeShape& shape, const std::vector<int64_t>& widths) const;
  // predict() of a chain of `length` draft tokens (0: a step that drafts nothing).
  double predict_chain(int64_t length, const std::vector<int64_t>& widths) const;
};

// Times program calls on scratch slots only (nothing committed is touched), with masks as
// wide as a `context`-token context needs (a call's cost grows with the context).
struct CostProbe {
  int64_t repeats = 5;
  int64_t context = 256;
  // Median wall time of `method` after one warm-up call.
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

// The timing-free costs of a seeded sampling request under --tree auto
// (contract::kAutoSeeded*): every level one draft call, whatever the step width.
StepCosts fixed_costs(const std::vector<int64_t>& widths);

// Median wall time of each verify width, of a decode at `position` (the next slot to be
// committed; not timed when negative) and of the draft runner's own calls.
StepCosts measure_costs(TargetProgram& target, SpeculativeDraftRunner* draft,
                        int64_t position = -1, const CostProbe& probe = {});

}  // namespace etspec
