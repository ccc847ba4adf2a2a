// runtime/speculative/settings.py's TreeSettings: the user-facing tree options (--tree and
// friends), resolved per target into the shape a speculative generator runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "artifact.h"
#include "speculative/draft_runner.h"
#include "speculative/shapes.h"

namespace etspec {

// contract::kRunSettings' row of `flag` (our name, not an alias); nullptr: not a setting.
const contract::RunSetting* run_setting(const std::string& flag);
// The row of a field ("method.min_ngram"); nullptr: none.
const contract::RunSetting* run_setting_of(const std::string& field);
// The draft method options' names, comma-separated (for an unknown one's message).
std::string method_option_names();
// Refuses a setting given with a tree mode or draft method that does not read it, or an
// integer below its minimum: the words of Python's RunnerSpec and TreeSettings.
void check_owner(const std::string& flag, bool given, const std::string& tree_mode,
                 const std::string& draft_method);
void check_minimum(const std::string& flag, std::optional<int64_t> value);

struct TreeSettings {
  std::string mode = "auto";  // chain | static | dynamic | auto (the dispatcher)
  int64_t num_spec_tokens = contract::kDefaultChainLength;  // the chain's length
  std::optional<std::string> static_tree;  // D3xBF2 / N8 / JSON (default: N fills K - 1)
  std::optional<int64_t> depth;            // dynamic: expansion passes (default from K)
  std::optional<int64_t> num_steps;        // dynamic: SGLang's name for depth + 1
  std::optional<int64_t> topk;
  std::optional<int64_t> total_tokens;     // dynamic: nodes incl. the root (default K)

  // Throws Error for an unknown mode, a knob below its minimum or given with another mode,
  // or both --depth and --num-steps.
  void check() const;
  // The policy on `target` with `drafter` (settings.py tree_policy): auto weighs a plain
  // decode, the drafter's offers and the model shapes it can grow; a fixed shape is itself,
  // or, for a drafter that also offers (prompt lookup beside a model), weighed against them.
  std::unique_ptr<TreePolicy> policy(const TargetMetadata& target,
                                     const SpeculativeDraftRunner& drafter) const;
  // The one shape a chain, static or dynamic setting asks for.
  std::unique_ptr<TreeShape> shape(const TargetMetadata& target) const;
};

}  // namespace etspec
