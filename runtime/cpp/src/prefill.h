// runtime/prefill.py: the prompt into the target's KV in prefill_chunk calls (pad rows take
// the positions after the real ones), the last logits and every prompt row's hidden states.
#pragma once

#include <cstdint>
#include <vector>

#include "program.h"

namespace etspec {

struct PrefillResult {
  std::vector<float> logits;  // [V] of the last prompt token
  Tensor hidden;              // [n, hidden states] of every prompt token
  int64_t calls = 0;
};

// Writes prompt[start..] at positions start..: slots [0, start) already hold the rest.
PrefillResult prefill_target(TargetProgram& target, const std::vector<int64_t>& prompt,
                             int64_t start = 0);

// An attending target method: `inputs` (the mask last), then the band when the target has
// sliding layers (MaskLayout::band). `inputs` own the tensors the values point at.
std::vector<Tensor> run_attending(Program& target, const std::string& method,
                                  std::vector<executorch::extension::TensorPtr> inputs,
                                  std::vector<int64_t>& band);

}  // namespace etspec
