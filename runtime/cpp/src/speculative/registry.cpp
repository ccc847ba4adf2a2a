#include "speculative/registry.h"

#include "speculative/combined.h"
#include "speculative/eagle3.h"
#include "speculative/gemma4_assistant.h"
#include "speculative/prompt_lookup.h"

namespace etspec {
namespace {

// Which method reads which option, and each option's minimum, is the contract's
// (RUN_SETTINGS, checked by LoadOptions::check): these refuse what the files lack.
void check_eagle3(bool has_draft, const DraftOptions& o) {
  if (o.get("draft_window") && !has_draft) throw Error(message("window_needs_draft", {}));
}

void check_assistant(bool has_draft, const DraftOptions&) {
  if (has_draft) throw Error(message("assistant_with_draft", {}));
}

void check_lookup(bool has_draft, const DraftOptions&) {
  if (has_draft) throw Error(message("lookup_with_draft", {}));
}

// The default method: without a draft, target-only (as EAGLE-3 without one).
void check_combined(bool has_draft, const DraftOptions& o) { check_eagle3(has_draft, o); }

std::unique_ptr<PromptLookupDraftRunner> lookup_runner(const DraftOptions& o) {
  // As `etspec generate`'s defaults (contract.DEFAULT_MAX_NGRAM).
  const int64_t lo = o.get("min_ngram").value_or(1);
  const int64_t hi = o.get("max_ngram").value_or(std::max<int64_t>(contract::kDefaultMaxNgram, lo));
  return std::make_unique<PromptLookupDraftRunner>(hi, lo);
}

std::unique_ptr<SpeculativeDraftRunner> make_eagle3(TargetProgram& target, DraftProgram* draft,
                                                    const DraftOptions& o) {
  const int64_t window = o.get("draft_window").value_or(0);
  return std::make_unique<Eagle3DraftRunner>(*draft, target.meta, window);
}

std::unique_ptr<SpeculativeDraftRunner> make_assistant(TargetProgram& target, DraftProgram*,
                                                       const DraftOptions&) {
  return std::make_unique<Gemma4AssistantDraftRunner>(target);
}

std::unique_ptr<SpeculativeDraftRunner> make_lookup(TargetProgram&, DraftProgram*,
                                                    const DraftOptions& o) {
  return lookup_runner(o);
}

std::unique_ptr<SpeculativeDraftRunner> make_combined(TargetProgram& target, DraftProgram* draft,
                                                      const DraftOptions& o) {
  return std::make_unique<CombinedDraftRunner>(make_eagle3(target, draft, o), lookup_runner(o));
}

}  // namespace

const std::vector<DraftMethod>& draft_methods() {
  static const std::vector<DraftMethod> methods = {
      {contract::kEagle3, true, check_eagle3, make_eagle3},
      {contract::kGemma4AssistantMethod, false, check_assistant, make_assistant},
      {contract::kPromptLookupMethod, false, check_lookup, make_lookup},
      {contract::kCombinedMethod, true, check_combined, make_combined},
  };
  return methods;
}

const DraftMethod& draft_method(const std::string& name) {
  std::string choices;
  for (const auto& m : draft_methods()) {
    if (name == m.name) return m;
    choices += (choices.empty() ? "" : ", ") + std::string(m.name);
  }
  throw Error(message("unknown_choice",
                      {{"what", "--draft-method"}, {"value", name}, {"choices", choices}}));
}

}  // namespace etspec
