#include "speculative/combined.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace etspec {
namespace {

constexpr size_t kRecentSteps = 32;  // step times kept per arm (combined.py _RECENT_STEPS)
constexpr double kInf = std::numeric_limits<double>::infinity();
const char kLookupArm[] = "lookup@";

std::string lookup_arm(int64_t width) { return kLookupArm + std::to_string(width); }

// statistics.median: the mean of the two middle values of an even count.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

double lookup_tokens(const DepthAcceptance* accepted, int64_t length, double z) {
  double total = 1.0, reach = 1.0;
  const int64_t deepest = accepted ? accepted->reached.size() : 0;  // every one was reached
  for (int64_t depth = 0; depth < length; ++depth) {
    int64_t n = 0, a = 0;
    if (deepest) {
      const int64_t d = std::min(depth, deepest - 1);
      n = accepted->reached[d];
      a = accepted->accepted[d];
    }
    const double p = (a + 1.0) / (n + 2.0);
    reach *= std::min(1.0, p + z * std::sqrt(p * (1 - p) / (n + 2.0)));
    total += reach;
  }
  return total;
}

std::optional<double> CombinedDraftRunner::Learned::step_s(const std::string& arm) const {
  const auto it = seconds.find(arm);
  if (it == seconds.end() || it->second.empty()) return std::nullopt;
  return median({it->second.begin(), it->second.end()});
}

CombinedDraftRunner::CombinedDraftRunner(std::unique_ptr<SpeculativeDraftRunner> model,
                                         std::unique_ptr<PromptLookupDraftRunner> lookup,
                                         std::vector<int64_t> verify_widths)
    : model_(std::move(model)), lookup_(std::move(lookup)), widths_(std::move(verify_widths)) {
  std::sort(widths_.begin(), widths_.end());
  fixed_ = fixed_costs(widths_);
}

void CombinedDraftRunner::reset() {
  model_->reset();
  lookup_->reset();
  pending_.reset();
}

int64_t CombinedDraftRunner::prefill(const std::vector<int64_t>& prompt, int64_t first,
                                     const Tensor& hidden) {
  request_.reset();
  pending_.reset();
  lookup_->prefill(prompt, first, hidden);
  return model_->prefill(prompt, first, hidden);
}

int64_t CombinedDraftRunner::accept(const Acceptance& acceptance) {
  lookup_->accept(acceptance);
  return model_->accept(acceptance);
}

CombinedDraftRunner::Learned& CombinedDraftRunner::learned_for(const Sampler& sampler) {
  if (sampler.greedy() || !sampler.seeded()) return learned_;
  if (!request_) request_.emplace();
  return *request_;
}

double CombinedDraftRunner::model_bound(const Learned& learned, const TreeShape& shape,
                                        double z) const {
  const auto rec = learned.model.find(shape.name);
  const auto seconds = learned.step_s(shape.name);
  if (rec == learned.model.end() || !rec->second.steps || !seconds || *seconds <= 0) {
    return kInf;  // never run: try it
  }
  const StepRecord& r = rec->second;
  return (static_cast<double>(r.tokens) / r.steps + z * r.standard_error()) / *seconds;
}

double CombinedDraftRunner::lookup_bound(const Learned& learned, int64_t ngram, int64_t length,
                                         int64_t width, double z) const {
  auto seconds = learned.step_s(lookup_arm(width));
  if (!seconds) {
    // A width the lookup has not run yet: as fast as its fastest one (optimistic).
    for (const auto& [arm, recent] : learned.seconds) {
      if (arm.rfind(kLookupArm, 0) != 0) continue;
      const auto s = learned.step_s(arm);
      if (s && *s > 0 && (!seconds || *s < *seconds)) seconds = s;
    }
    if (!seconds) return kInf;
  }
  const auto it = learned.lookup.find(ngram);
  return lookup_tokens(it == learned.lookup.end() ? nullptr : &it->second, length, z) / *seconds;
}

Proposal CombinedDraftRunner::propose(const TreeShape& shape, int64_t max_height,
                                      Sampler& sampler) {
  Learned& learned = learned_for(sampler);
  const int64_t widest = widths_.empty() ? 1 : widths_.back();
  auto [ngram, tokens] = lookup_->match(std::min(max_height, widest - 1));
  if (!tokens.empty()) {
    const double z = std::sqrt(2 * std::log(std::max<double>(learned.steps, 2)));
    const double model_rate = model_bound(learned, shape, z);
    double best_rate = -1;
    int64_t best_length = 0, best_width = 0;
    for (int64_t width : widths_) {
      const int64_t length = std::min<int64_t>(tokens.size(), width - 1);
      // The narrowest width that holds a length is its cheapest.
      if (length < 1 || (best_length && length == best_length)) continue;
      const double rate = lookup_bound(learned, ngram, length, width, z);
      if (!best_length || rate > best_rate) {
        best_rate = rate;
        best_length = length;
        best_width = width;
      }
    }
    // Ties (neither tried yet) go to the lookup: it costs no draft call.
    if (best_length && best_rate >= model_rate) {
      pending_ = Pending{&learned, lookup_arm(best_width), &shape, ngram, best_width};
      Proposal out;
      out.tokens.assign(tokens.begin(), tokens.begin() + best_length);
      for (int64_t i = 0; i < best_length; ++i) out.parents.push_back(i);
      out.label = contract::kLookupLabel;
      return out;
    }
  }
  pending_ = Pending{&learned, shape.name, &shape, 0, 0};
  return model_->propose(shape, max_height, sampler);
}

void CombinedDraftRunner::observe(const StepOutcome& step) {
  if (!pending_) return;  // the step drafted nothing (the budget's last token)
  const Pending p = *pending_;
  pending_.reset();
  Learned& learned = *p.learned;
  double seconds = step.seconds;
  if (&learned != &learned_) {  // a seeded request: fixed prices, not wall time
    seconds = p.ngram ? fixed_.verify_s.at(p.width) : fixed_.predict(*p.shape, widths_);
  }
  ++learned.steps;
  auto& recent = learned.seconds[p.arm];
  recent.push_back(seconds);
  if (recent.size() > kRecentSteps) recent.pop_front();
  if (p.ngram) {
    learned.lookup[p.ngram].observe(step.height, step.accepted);
  } else {
    learned.model[p.arm].add(step.emitted(), seconds);
  }
}

}  // namespace etspec
