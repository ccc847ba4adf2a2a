#include "speculative/combined.h"

namespace etspec {

CombinedDraftRunner::CombinedDraftRunner(std::unique_ptr<SpeculativeDraftRunner> model,
                                         std::unique_ptr<PromptLookupDraftRunner> lookup)
    : model_(std::move(model)), lookup_(std::move(lookup)) {}

void CombinedDraftRunner::reset() {
  model_->reset();
  lookup_->reset();
}

int64_t CombinedDraftRunner::prefill(const std::vector<int64_t>& prompt, int64_t first,
                                     const Tensor& hidden) {
  lookup_->prefill(prompt, first, hidden);
  return model_->prefill(prompt, first, hidden);
}

int64_t CombinedDraftRunner::accept(const Acceptance& acceptance) {
  lookup_->accept(acceptance);
  return model_->accept(acceptance);
}

}  // namespace etspec
