// runtime/speculative/registry.py: the draft methods by name. A new method is a new
// SpeculativeDraftRunner and one entry here; nothing else asks which method runs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program.h"
#include "speculative/draft_runner.h"

namespace etspec {

// The method options a runner may use (RunnerSpec's, loading.h).
// A draft method's own options (the `method.*` rows of contract::kRunSettings, by name:
// "min_ngram", "draft_window"); one not given takes the method's default.
struct DraftOptions {
  std::map<std::string, int64_t> values;
  std::optional<int64_t> get(const std::string& name) const {
    const auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
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
