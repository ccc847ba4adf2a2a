// Greedy and seeded sampling with the Python runtime's semantics (runtime/sampling.py):
// temperature, then top-k, then top-p (the smallest prefix whose mass reaches top_p, tied
// tokens in index order). The random stream is the C++ standard library's, so sampled ids
// differ from Python's for the same seed; the distribution does not (a chi-square test
// checks it).
//
// At a 262k vocabulary every pass over a row costs ~0.1 ms and a sort tens of ms, so a row
// becomes a TokenDist over only the tokens it can draw: a few passes (max, exp and sum,
// one threshold), then a sort of the few hundred tokens top-p can keep. The verifier's
// rejections then work on those entries, not on the vocabulary.
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

// A distribution held sparsely (runtime/sampling.py TokenDist): the tokens with mass, each
// once, and their probabilities, summing to 1. Every operation costs O(ids), not O(vocab).
struct TokenDist {
  std::vector<int64_t> ids;
  std::vector<double> probs;

  double prob(int64_t token) const;
  // normalize(max(this - q, 0)) into `out`; false when nothing is left (this == q).
  bool minus(const TokenDist& q, TokenDist& out) const;
  // Renormalized without `token` into `out`; false when nothing else has mass.
  bool without(int64_t token, TokenDist& out) const;
  // The token at quantile u in [0, 1) of the cumulative distribution.
  int64_t draw(double u) const;
  // The token whose exponential clock -ln u / p rings first for `key` at sequence `index`
  // (contract::coupling_uniform; runtime/sampling.py TokenDist.race): ties go to the lower id.
  int64_t race(uint64_t key, int64_t index) const;
  // Each id i renamed names[i] (draft ids -> target ids).
  void rename(const std::vector<int64_t>& names);
};

class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config);
  bool greedy() const { return config_.greedy(); }
  bool seeded() const { return config_.seeded; }
  // A seeded request samples by coupling (TokenDist::race): the token at each sequence index
  // follows from the seed, the index and the distribution alone, so speculation gives
  // target-only's text for the seed whatever it proposed (runtime/sampling.py Sampler).
  bool coupled() const { return config_.seeded; }
  // The distribution of n logits after temperature, top-k and top-p, refusing a row
  // nothing can be drawn from (a NaN or infinite logit, or none finite) with the Python
  // runtime's message.
  TokenDist dist(const float* logits, int64_t n);
  // A token from `dist` for sequence position `index` (the prompt's first token is 0):
  // raced when coupled, else the generator's next draw.
  int64_t draw(const TokenDist& dist, int64_t index) {
    return coupled() ? dist.race(config_.seed, index) : dist.draw(uniform());
  }
  double uniform();
  // The token at sequence `index` from raw logits: argmax when greedy (first maximum), else
  // a draw.
  int64_t pick(const float* logits, int64_t n, int64_t index);

 private:
  void top_p(TokenDist& dist, double total);

  SamplingConfig config_;
  std::mt19937_64 rng_;
  std::vector<float> gap_;  // (logit - max) / temperature per token, reused across rows
  std::vector<int64_t> order_;
};

int64_t argmax(const float* x, int64_t n);

}  // namespace etspec
