// runtime/speculative/registry.py: the draft methods by name. A new method is a new
// SpeculativeDraftRunner and one entry here; nothing else asks which method runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program.h"
#include "speculative/draft_runner.h"

namespace etspec {

// The method options a runner may use (RunnerSpec's, loading.h).
struct DraftOptions {
  std::optional<int64_t> draft_window;  // EAGLE-3: attend to the last N positions only
  std::optional<int64_t> min_ngram, max_ngram;  // prompt lookup
};

struct DraftMethod {
  const char* name;
  bool draft_program;  // drafts with a draft .pte of its own (--draft)
  // Refuses options and files this method cannot take, before anything loads.
  void (*check)(bool has_draft, const DraftOptions& options);
  std::unique_ptr<SpeculativeDraftRunner> (*make)(TargetProgram& target, DraftProgram* draft,
                                                  const DraftOptions& options);
};

const std::vector<DraftMethod>& draft_methods();
// Throws Error (unknown_choice) for a name not registered.
const DraftMethod& draft_method(const std::string& name);

}  // namespace etspec
