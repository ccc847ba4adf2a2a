#include "speculative/gemma4_assistant.h"

#include <algorithm>

#include "masks.h"

namespace etspec {

Gemma4AssistantDraftRunner::Gemma4AssistantDraftRunner(TargetProgram& target)
    : program_(target) {
  if (target.meta.assistant != contract::kGemma4Assistant ||
      !target.has_method(contract::kASSISTANT_STEP)) {
    throw Error(message("no_assistant", {}));
  }
  target_ids_ = iota(0, target.meta.vocab_size);
}

int64_t Gemma4AssistantDraftRunner::prefill(const std::vector<int64_t>& prompt, int64_t first,
                                            const Tensor& hidden) {
  token_ = first;
  const int64_t last = hidden.sizes[0] - 1;
  state_.assign(hidden.row(last), hidden.row(last) + hidden.cols());
  position_ = prompt.size();
  return 0;
}

int64_t Gemma4AssistantDraftRunner::accept(const Acceptance& acceptance) {
  const auto& hidden = acceptance.hidden;
  const int64_t hb = hidden.size() / acceptance.tokens.size();
  token_ = acceptance.next_token;
  state_.assign(hidden.end() - hb, hidden.end());
  position_ = acceptance.position + acceptance.tokens.size();
  return 0;
}

Proposal Gemma4AssistantDraftRunner::propose(const TreeShape& shape, int64_t max_height,
                                             Sampler& sampler) {
  const AssistantStep step{program_, program_.meta.assistant_step_width, position_,
                           static_cast<int64_t>(state_.size())};
  AssistantExpansion expansion(step, token_, state_);
  expansion.target_ids = &target_ids_;
  expansion.vocab_size = program_.meta.vocab_size;
  return shape.grow(expansion, max_height, sampler);
}

void AssistantStep::operator()(const std::vector<int64_t>& tokens,
                               const std::vector<float>& states,
                               std::vector<std::vector<float>>& logits,
                               std::vector<float>& out) const {
  const int64_t w = width, hb = state_size, n = tokens.size();
  std::vector<int64_t> at{position};
  for (int64_t lo = 0; lo < n; lo += w) {
    const int64_t rows = std::min(w, n - lo);
    std::vector<int64_t> ids(w, 0);
    std::copy_n(tokens.begin() + lo, rows, ids.begin());
    std::vector<float> fed(w * hb, 0.0f);
    std::copy_n(states.begin() + lo * hb, rows * hb, fed.begin());
    auto res = program.run(contract::kASSISTANT_STEP, {longs(ids), floats(fed, w, hb), longs(at)});
    for (int64_t r = 0; r < rows; ++r) {
      logits.emplace_back(res[0].row(r), res[0].row(r) + res[0].cols());
      out.insert(out.end(), res[1].row(r), res[1].row(r) + hb);
    }
  }
}

AssistantExpansion::AssistantExpansion(const AssistantStep& step, int64_t token,
                                       const std::vector<float>& state)
    : step_(step) {
  std::vector<std::vector<float>> logits;
  step_({token}, state, logits, states_);
  root_ = std::move(logits[0]);
  calls = 1;
  position = step.position;
}

std::vector<std::vector<float>> AssistantExpansion::expand(const std::vector<int64_t>& parents,
                                                           const std::vector<int64_t>& tokens) {
  const int64_t hb = step_.state_size;
  std::vector<float> in(parents.size() * hb);
  for (size_t r = 0; r < parents.size(); ++r) {
    std::copy_n(states_.data() + parents[r] * hb, hb, in.data() + r * hb);
  }
  std::vector<std::vector<float>> logits;
  step_(tokens, in, logits, states_);
  calls += step_.calls(tokens.size());
  return logits;
}

}  // namespace etspec

namespace etspec {

DraftCosts Gemma4AssistantDraftRunner::step_costs(const CostProbe& probe) {
  const int64_t w = program_.meta.assistant_step_width, h = program_.meta.hidden_size;
  std::vector<int64_t> ids(w, 0), at{1};
  std::vector<float> states(w * h, 0.0f);
  const double seconds =
      probe.timed(program_, contract::kASSISTANT_STEP, {longs(ids), floats(states, w, h), longs(at)});
  return {w, seconds, seconds};
}

}  // namespace etspec
