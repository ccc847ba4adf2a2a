// runtime/speculative/settings.py's TreeSettings: the user-facing tree options (--tree and
// friends), resolved per target into the shape a speculative generator runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "artifact.h"
#include "speculative/shapes.h"

namespace etspec {

struct TreeSettings {
  std::string mode = "auto";  // chain | static | dynamic | auto (the dispatcher)
  int64_t num_spec_tokens = contract::kDefaultChainLength;  // the chain's length
  std::optional<std::string> static_tree;  // D3xBF2 / N8 / JSON (default: N fills K - 1)
  std::optional<int64_t> depth;            // dynamic: expansion passes (default from K)
  std::optional<int64_t> topk;
  std::optional<int64_t> total_tokens;     // dynamic: nodes incl. the root (default K)

  // Throws Error for an unknown mode or dynamic knobs given with another mode.
  void check() const;
  // `branching`: the drafter can grow trees (else auto considers chains only).
  std::unique_ptr<TreePolicy> policy(const TargetMetadata& target, bool branching) const;
};

}  // namespace etspec
