#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>

#include "artifact.h"

namespace etspec {

namespace {

// exp(x) for x <= 0, to a few ulp, written so the compiler vectorizes the loop that calls
// it (std::exp is one library call per element: ~1 ms over a 262k row, this ~0.1 ms; the
// selects vectorize under -fno-trapping-math, which CMakeLists.txt sets for this file):
// x = n ln2 + r with |r| <= ln2/2, exp(x) = 2^n * p(r) (Cephes' expf polynomial). Below
// contract::kExpUnderflow the result would leave float's normal range: no mass, as in
// runtime/sampling.py.
inline float exp_nonpositive(float x) {
  const float xc = std::max(x, contract::kExpUnderflow);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (xc * 1.44269504088896341f + shifter) - shifter;
  const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x <= contract::kExpUnderflow ? 0.0f : p * scale;
}

// The passes over a whole row, compiled also for AVX2 and AVX-512 where the compiler can pick
// the widest the CPU has at load time (GCC on x86-64 Linux; elsewhere the baseline build):
// a 262k-entry exp pass costs ~0.5 ms with SSE2 and ~0.08 ms with AVX-512.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ETSPEC_ROW_PASS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ETSPEC_ROW_PASS
#endif

// The largest of x (NaN compares false and is skipped), over eight independent running
// maxima: one chain would wait on each comparison.
ETSPEC_ROW_PASS float max_of(const float* x, int64_t n) {
  const float lowest = -std::numeric_limits<float>::infinity();
  float m[8] = {lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  }
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float top = m[0];
  for (float v : m) top = v > top ? v : top;
  return top;
}

// e[i] = exp((x[i] - top) * inv_t).
ETSPEC_ROW_PASS void exp_gaps(const float* x, float* e, int64_t n, float top, float inv_t) {
  for (int64_t i = 0; i < n; ++i) e[i] = exp_nonpositive((x[i] - top) * inv_t);
}

// Their sum, in eight partial double sums (one running sum waits on every add).
ETSPEC_ROW_PASS double sum(const float* x, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += x[i + j];
  }
  for (; i < n; ++i) s[0] += x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

ETSPEC_ROW_PASS bool has_nan(const float* x, int64_t n) {
  int nan = 0;
  for (int64_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  return nan != 0;
}

// The k-th largest of x, by a min-heap of the k largest so far; after the first k, blocks of
// 16 with nothing above the heap's least are passed over at once.
ETSPEC_ROW_PASS float kth_largest(const float* x, int64_t n, int64_t k) {
  std::priority_queue<float, std::vector<float>, std::greater<float>> heap;
  int64_t i = 0;
  for (; i < n && static_cast<int64_t>(heap.size()) < k; ++i) heap.push(x[i]);
  for (; i < n; i += 16) {
    const int64_t end = std::min<int64_t>(i + 16, n);
    const float least = heap.top();
    int hit = 0;
    for (int64_t j = i; j < end; ++j) hit |= x[j] > least;
    if (!hit) continue;
    for (int64_t j = i; j < end; ++j) {
      if (x[j] > heap.top()) {
        heap.pop();
        heap.push(x[j]);
      }
    }
  }
  return heap.top();
}

// Appends every i with e[i] >= threshold (and e[i] > 0) and its e; returns their sum. Few
// entries pass: blocks of 16 are tested at once and only a block with a hit is scanned.
ETSPEC_ROW_PASS double collect(const float* e, int64_t n, float threshold,
                               std::vector<int64_t>& ids, std::vector<double>& probs) {
  const float t = threshold > 0 ? threshold : std::numeric_limits<float>::denorm_min();
  double mass = 0;
  for (int64_t b = 0; b < n; b += 16) {
    const int64_t end = std::min<int64_t>(b + 16, n);
    int hit = 0;
    for (int64_t i = b; i < end; ++i) hit |= e[i] >= t;
    if (!hit) continue;
    for (int64_t i = b; i < end; ++i) {
      if (e[i] >= t) {
        ids.push_back(i);
        probs.push_back(e[i]);
        mass += e[i];
      }
    }
  }
  return mass;
}

// A heap finds the k largest in one pass for small k; nth_element beyond.
constexpr int64_t kHeapTopK = 1024;

}  // namespace

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

double TokenDist::prob(int64_t token) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == token) return probs[i];
  }
  return 0.0;
}

namespace {

bool normalized(const std::vector<int64_t>& ids, std::vector<double> weights, TokenDist& out) {
  double total = 0;
  for (double w : weights) total += w;
  if (!(total > 0)) return false;
  for (double& w : weights) w /= total;
  out.ids = ids;
  out.probs = std::move(weights);
  return true;
}

}  // namespace

bool TokenDist::minus(const TokenDist& q, TokenDist& out) const {
  // max(p - q, 0) is 0 wherever p is: only p's entries are visited; q is looked up by id.
  std::vector<std::pair<int64_t, double>> qs(q.ids.size());
  for (size_t i = 0; i < q.ids.size(); ++i) qs[i] = {q.ids[i], q.probs[i]};
  std::sort(qs.begin(), qs.end());
  std::vector<double> r(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = std::lower_bound(qs.begin(), qs.end(), std::make_pair(ids[i], -1.0));
    const double qi = (it != qs.end() && it->first == ids[i]) ? it->second : 0.0;
    r[i] = std::max(probs[i] - qi, 0.0);
  }
  return normalized(ids, std::move(r), out);
}

bool TokenDist::without(int64_t token, TokenDist& out) const {
  std::vector<double> r(probs);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == token) r[i] = 0.0;
  }
  return normalized(ids, std::move(r), out);
}

int64_t TokenDist::draw(double u) const {
  double total = 0;
  for (double p : probs) total += p;
  u *= total;
  int64_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last = ids[i];
    if (u < probs[i]) return last;
    u -= probs[i];
  }
  return last;  // rounding left u past the end: the last token with mass
}

int64_t TokenDist::race(uint64_t key, int64_t index) const {
  const uint64_t base = contract::coupling_base(key, index);
  int64_t best = -1;
  double first = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double clock = -std::log(contract::coupling_uniform(base, ids[i])) / probs[i];
    if (best < 0 || clock < first || (clock == first && ids[i] < best)) {
      best = ids[i];
      first = clock;
    }
  }
  return best;
}

void TokenDist::rename(const std::vector<int64_t>& names) {
  for (auto& id : ids) id = names[id];
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

TokenDist Sampler::dist(const float* x, int64_t n) {
  // The largest logit (a NaN is skipped here; it shows in the total below).
  const float top = max_of(x, n);
  // No finite logit, or an infinite one: nothing can be drawn.
  if (!std::isfinite(top)) throw Error(message("target_logits_nan", {}));
  const auto refuse_nan = [](double total) {
    if (!std::isfinite(total)) throw Error(message("target_logits_nan", {}));
  };
  const float inv_t = static_cast<float>(1.0 / config_.temperature);
  TokenDist out;
  if (config_.top_k > 0 && config_.top_k < n) {
    // The k-th largest logit; every token tied with it is kept, as runtime/sampling.py does.
    float kth;
    if (config_.top_k <= kHeapTopK) {
      kth = kth_largest(x, n, config_.top_k);
    } else {
      gap_.assign(x, x + n);
      std::nth_element(gap_.begin(), gap_.begin() + (config_.top_k - 1), gap_.end(),
                       std::greater<float>());
      kth = gap_[config_.top_k - 1];
    }
    if (std::isnan(kth) || has_nan(x, n)) throw Error(message("target_logits_nan", {}));
    // Every token at or above the k-th logit (ties kept), weighed in double.
    double total = 0;
    for (int64_t b = 0; b < n; b += 16) {
      const int64_t end = std::min<int64_t>(b + 16, n);
      int hit = 0;
      for (int64_t i = b; i < end; ++i) hit |= x[i] >= kth;
      if (!hit) continue;
      for (int64_t i = b; i < end; ++i) {
        if (x[i] < kth) continue;
        const double gap = (static_cast<double>(x[i]) - top) / config_.temperature;
        if (gap <= contract::kExpUnderflow) continue;
        const double w = std::exp(gap);
        out.ids.push_back(i);
        out.probs.push_back(w);
        total += w;
      }
    }
    top_p(out, total);
    return out;
  }
  // e = exp((logit - max) / temperature) for every token, in place in a reused buffer.
  gap_.resize(n);
  float* e = gap_.data();
  exp_gaps(x, e, n, top, inv_t);
  const double total = sum(e, n);
  refuse_nan(total);  // a NaN logit makes its e, and so the total, NaN
  const double need = config_.top_p * total;
  const auto collect_above = [&](float threshold) {
    out.ids.clear();
    out.probs.clear();
    return collect(e, n, threshold, out.ids, out.probs);
  };
  if (config_.top_p >= 1.0) {
    out.ids.reserve(n);
    out.probs.reserve(n);
    collect_above(0.0f);
    top_p(out, total);
    return out;
  }
  // The kept tokens are a prefix by probability, so they lie within any threshold set
  // {e >= exp(-c)} holding top_p of the mass (runtime/sampling.py Sampler.dist).
  double low = 0, high = 0;
  bool found = false;
  for (double cutoff : contract::kTopPCutoffs) {
    high = cutoff;
    if (collect_above(static_cast<float>(std::exp(-cutoff))) >= need) {
      found = true;
      break;
    }
    low = cutoff;
  }
  if (!found) collect_above(0.0f);
  if (found) {
    for (int round = 0; round < contract::kTopPBisections &&
         static_cast<int64_t>(out.ids.size()) > contract::kTopPSortSize;
         ++round) {
      const double mid = 0.5 * (low + high);
      const double threshold = std::exp(-mid);
      double mass = 0;
      for (size_t i = 0; i < out.ids.size(); ++i) {
        if (out.probs[i] >= threshold) mass += out.probs[i];
      }
      if (mass >= need) {
        size_t k = 0;
        for (size_t i = 0; i < out.ids.size(); ++i) {
          if (out.probs[i] >= threshold) {
            out.ids[k] = out.ids[i];
            out.probs[k++] = out.probs[i];
          }
        }
        out.ids.resize(k);
        out.probs.resize(k);
        high = mid;
      } else {
        low = mid;
      }
    }
  }
  top_p(out, total);
  return out;
}

void Sampler::top_p(TokenDist& dist, double total) {
  // The smallest prefix by weight whose mass reaches top_p of `total` (at least one token;
  // ties in index order: the ids arrive ascending and the sort is stable), normalized.
  if (config_.top_p < 1.0) {
    const size_t m = dist.ids.size();
    order_.resize(m);
    for (size_t i = 0; i < m; ++i) order_[i] = static_cast<int64_t>(i);
    const auto& w = dist.probs;
    std::stable_sort(order_.begin(), order_.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
    const double need = config_.top_p * total;
    std::vector<int64_t> ids;
    std::vector<double> probs;
    double before = 0;
    for (int64_t j : order_) {
      if (!ids.empty() && before >= need) break;
      ids.push_back(dist.ids[j]);
      probs.push_back(w[j]);
      before += w[j];
    }
    dist.ids = std::move(ids);
    dist.probs = std::move(probs);
  }
  double kept = 0;
  for (double p : dist.probs) kept += p;
  for (double& p : dist.probs) p /= kept;
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int64_t Sampler::pick(const float* logits, int64_t n, int64_t index) {
  if (greedy()) return argmax(logits, n);
  return draw(dist(logits, n), index);
}

}  // namespace etspec
