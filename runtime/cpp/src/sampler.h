// Greedy and seeded sampling with the Python runtime's semantics (runtime/sampling.py):
// temperature, then top-k, then top-p (the smallest prefix whose mass reaches top_p). The
// random stream is the C++ standard library's, so sampled ids differ from Python's for the
// same seed; the distribution does not (a chi-square test checks it).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "etspec_contract.h"

namespace etspec {

struct SamplingConfig {
  double temperature = 0.0;  // 0 (below contract::kSamplingEps) is greedy
  int64_t top_k = 0;         // 0 keeps the whole vocabulary
  double top_p = 1.0;
  uint64_t seed = 0;
  bool seeded = false;
  // Throws Error with the Python runtime's message for a setting out of range.
  void check() const;
  bool greedy() const { return temperature < contract::kSamplingEps; }
};

class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config);
  bool greedy() const { return config_.greedy(); }
  bool seeded() const { return config_.seeded; }
  // Probabilities of n logits after temperature, top-k and top-p.
  std::vector<float> probs(const float* logits, int64_t n) const;
  // probs of target logits, refusing a row nothing can be drawn from (NaN, or no finite
  // logit) with the Python runtime's message instead of drawing from NaN weights.
  std::vector<float> target_probs(const float* logits, int64_t n) const;
  int64_t draw(const std::vector<float>& probs);
  double uniform();
  // The next token from raw logits: argmax when greedy (first maximum), else a draw.
  int64_t pick(const float* logits, int64_t n);

 private:
  SamplingConfig config_;
  std::mt19937_64 rng_;
};

int64_t argmax(const float* x, int64_t n);

}  // namespace etspec
