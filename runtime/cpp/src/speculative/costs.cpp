#include "speculative/costs.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "stats.h"
#include "speculative/draft_runner.h"

namespace etspec {

double StepCosts::predict(const TreeShape& shape, const std::vector<int64_t>& widths) const {
  // Nothing to verify: a decode (the draft still follows what was committed).
  // Untimed (no position to probe at), a decode costs at most the narrowest verify.
  if (shape.max_nodes == 0) {
    return (decode_s > 0 ? decode_s : verify_s.at(widths.front())) + draft_extend_s;
  }
  int64_t width = widths.back();
  for (int64_t w : widths) {
    if (w >= shape.max_nodes + 1) {
      width = w;
      break;
    }
  }
  const int64_t per_call = std::max<int64_t>(step_width, 1);
  const int64_t calls = std::max<int64_t>(shape.levels, (shape.fed_nodes + per_call - 1) / per_call);
  return verify_s.at(width) + calls * draft_step_s + draft_extend_s;
}

double StepCosts::predict_chain(int64_t length, const std::vector<int64_t>& widths) const {
  if (length == 0) return predict(NoDraftShape(), widths);
  return predict(ChainShape(length), widths);
}

double CostProbe::timed(Program& program, const std::string& method,
                        const std::vector<executorch::extension::TensorPtr>& inputs) const {
  const std::vector<executorch::runtime::EValue> values(inputs.begin(), inputs.end());
  program.run(method, values);  // warm-up
  std::vector<double> times;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    program.run(method, values);
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;  // statistics.median
}

CostProbe::Inputs CostProbe::scratch_inputs(int64_t width, const MaskLayout& layout) const {
  Inputs in;
  in.rows = width;
  in.columns = layout.width(std::min(context, layout.max_context));
  in.mask.assign(width * in.columns, contract::kMaskMin);
  for (int64_t r = 0; r < width; ++r) {
    in.tokens.push_back(r % 2);
    in.positions.push_back(r);
    in.slots.push_back(layout.max_context + r);
    in.mask[r * in.columns + layout.column(in.slots.back(), in.columns)] = 0.0f;
  }
  in.band = layout.band(0, in.columns);
  return in;
}

CostProbe::Inputs CostProbe::decode_inputs(int64_t position, const MaskLayout& layout) const {
  Inputs in;
  in.rows = 1;
  in.columns = layout.width(std::max(position + 1, std::min(context, layout.max_context)));
  in.mask.assign(in.columns, contract::kMaskMin);
  in.mask[position] = 0.0f;
  in.tokens = {1};
  in.positions = {position};
  in.band = layout.band(position, in.columns);
  return in;
}

StepCosts measure_costs(TargetProgram& target, SpeculativeDraftRunner* draft, int64_t position,
                        const CostProbe& probe) {
  const auto& meta = target.meta;
  const MaskLayout layout{meta.max_context, meta.cache_size, meta.sliding_window};
  StepCosts costs;
  for (int64_t w : meta.verify_widths) {
    CostProbe::Inputs in = probe.scratch_inputs(w, layout);
    std::vector<executorch::extension::TensorPtr> inputs = {
        longs(in.tokens), longs(in.positions), longs(in.slots),
        floats(in.mask, in.rows, in.columns)};
    if (!in.band.empty()) inputs.push_back(longs(in.band));
    costs.verify_s[w] = probe.timed(target, meta.verify_method(w), inputs);
  }
  if (position >= 0 && position < meta.max_context) {
    CostProbe::Inputs in = probe.decode_inputs(position, layout);
    std::vector<executorch::extension::TensorPtr> inputs = {
        longs(in.tokens), longs(in.positions), floats(in.mask, in.rows, in.columns)};
    if (!in.band.empty()) inputs.push_back(longs(in.band));
    costs.decode_s = probe.timed(target, contract::kTARGET_DECODE, inputs);
  }
  // Load the commit too (copying scratch slots onto themselves): a tree's first commit
  // must not pay the method load inside a timed step.
  std::vector<int64_t> scratch = iota(meta.max_context, meta.verify_width);
  target.run(contract::kTARGET_COMMIT, {longs(scratch), longs(scratch)});
  const DraftCosts drafted = draft ? draft->step_costs(probe) : DraftCosts{};
  costs.step_width = drafted.step_width;
  costs.draft_step_s = drafted.step_s;
  costs.draft_extend_s = drafted.extend_s;
  return costs;
}

StepCosts fixed_costs(const std::vector<int64_t>& widths) {
  StepCosts costs;
  for (int64_t w : widths) {
    costs.verify_s[w] = contract::kAutoSeededVerifyBase + contract::kAutoSeededVerifyPerRow * w;
  }
  costs.draft_step_s = costs.draft_extend_s = contract::kAutoSeededDraftCall;
  costs.step_width = *std::max_element(widths.begin(), widths.end());
  costs.decode_s = contract::kAutoSeededVerifyBase + contract::kAutoSeededVerifyPerRow;
  return costs;
}

}  // namespace etspec
