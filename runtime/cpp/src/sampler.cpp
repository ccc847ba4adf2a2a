#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "artifact.h"

namespace etspec {

void SamplingConfig::check() const {
  if (std::isnan(temperature) || temperature < 0 || std::isinf(temperature)) {
    std::ostringstream m;
    m << temperature;
    throw Error(message("temperature", {{"value", m.str()}}));
  }
  if (top_k < 0) {
    throw Error(message("top_k", {{"value", std::to_string(top_k)}}));
  }
  if (std::isnan(top_p) || !(top_p > 0 && top_p <= 1)) {
    std::ostringstream m;
    m << top_p;
    throw Error(message("top_p", {{"value", m.str()}}));
  }
}

Sampler::Sampler(const SamplingConfig& config) : config_(config) {
  config_.check();
  rng_.seed(config.seeded ? config.seed : std::random_device{}());
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

std::vector<float> Sampler::probs(const float* logits, int64_t n) const {
  const double t = config_.temperature;
  std::vector<double> scaled(n);
  for (int64_t i = 0; i < n; ++i) {
    // NaN propagates to every probability, as in torch's softmax; it must not reach the
    // top-k selection below, whose comparisons need a strict weak order.
    if (std::isnan(logits[i])) return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
    scaled[i] = static_cast<double>(logits[i]) / t;
  }
  if (config_.top_k > 0 && config_.top_k < n) {
    std::vector<double> sorted(scaled);
    std::nth_element(sorted.begin(), sorted.begin() + (config_.top_k - 1), sorted.end(),
                     std::greater<>());
    const double kth = sorted[config_.top_k - 1];
    for (auto& s : scaled) {
      if (s < kth) s = -std::numeric_limits<double>::infinity();
    }
  }
  const double top = *std::max_element(scaled.begin(), scaled.end());
  std::vector<double> p(n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i] = std::exp(scaled[i] - top);
  for (auto& x : p) x /= total;
  if (config_.top_p < 1.0) {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double before = 0, kept = 0;
    for (int64_t i : order) {
      // Keep the smallest prefix whose mass reaches top_p (always at least one token).
      if (before >= config_.top_p) {
        before += p[i];
        p[i] = 0;
      } else {
        before += p[i];
        kept += p[i];
      }
    }
    for (auto& x : p) x /= kept;
  }
  return std::vector<float>(p.begin(), p.end());
}

std::vector<float> Sampler::target_probs(const float* logits, int64_t n) const {
  std::vector<float> p = probs(logits, n);
  for (float x : p) {
    if (!std::isfinite(x)) throw Error(message("target_logits_nan", {}));
  }
  return p;
}

int64_t Sampler::draw(const std::vector<float>& probs) {
  double total = 0;
  for (float x : probs) total += x;
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  int64_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last = static_cast<int64_t>(i);
    if (u < probs[i]) return last;
    u -= probs[i];
  }
  return last;  // rounding left u past the end: the last token with mass
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int64_t Sampler::pick(const float* logits, int64_t n) {
  if (greedy()) return argmax(logits, n);
  return draw(target_probs(logits, n));
}

}  // namespace etspec
