#include "speculative/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "speculative/dynamic_tree.h"
#include "speculative/static_tree.h"

namespace etspec {
namespace {

constexpr size_t kExtraKept = 64;
constexpr double kInf = std::numeric_limits<double>::infinity();

const ChainShape* as_chain(const TreeShape& shape) {
  return dynamic_cast<const ChainShape*>(&shape);
}

double median(std::deque<double> values) {  // statistics.median
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

void StepRecord::add(int64_t emitted, double step_seconds) {
  ++steps;
  tokens += emitted;
  squares += emitted * emitted;
  seconds += step_seconds;
}

double StepRecord::standard_error() const {
  if (!steps) return kInf;
  const double mean = double(tokens) / steps;
  const double spread = std::max(squares - steps * mean * mean, 0.0);
  const double var = (spread + 2 * 1.0) / (steps + 1);
  return std::sqrt(var / steps);
}

void DepthAcceptance::observe(int64_t height, int64_t accepted_tokens, int64_t allowed) {
  int64_t deepest = std::min(accepted_tokens + 1, height);
  // Every drafted token accepted, but the drafter offered fewer than the step allowed:
  // depth height + 1 was reached and ended the step as a rejection would (dispatcher.py).
  if (accepted_tokens == height && height < allowed) deepest = height + 1;
  while (static_cast<int64_t>(reached.size()) < deepest) {
    reached.push_back(0);
    accepted.push_back(0);
  }
  for (int64_t d = 0; d < deepest; ++d) {
    reached[d] += 1;
    accepted[d] += d < accepted_tokens;
  }
}

double DepthAcceptance::conditional(int64_t depth) const {
  int64_t last = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(reached.size()); ++d) {
    if (reached[d]) last = d;
  }
  if (last < 0) return 0.5;
  int64_t d = std::min(depth - 1, last);
  while (!reached[d]) --d;
  return (accepted[d] + 1.0) / (reached[d] + 2.0);
}

std::vector<double> DepthAcceptance::borrowed_upper(int64_t length, double z) const {
  std::vector<double> out;
  double prior = 0.5;
  for (int64_t d = 0; d < length; ++d) {
    const bool seen = d < static_cast<int64_t>(reached.size());
    const double n = seen ? reached[d] : 0, a = seen ? accepted[d] : 0;
    const double p = (a + 2 * prior) / (n + 2);
    out.push_back(std::min(1.0, p + z * std::sqrt(p * (1 - p) / (n + 2))));
    prior = p;
  }
  return out;
}

double DepthAcceptance::expected_tokens(int64_t length, std::optional<double> z) const {
  std::vector<double> probs, reach{1.0};
  for (int64_t d = 1; d <= length; ++d) {
    probs.push_back(conditional(d));
    reach.push_back(reach.back() * probs.back());
  }
  double total = 0.0;
  for (double r : reach) total += r;
  if (!z) return total;
  // The delta method, summed in dispatcher.py's order (deepest first) so that both
  // runtimes choose alike.
  double var = 0.0, tail = 0.0;
  for (int64_t d = length; d >= 1; --d) {
    tail += reach[d];
    const double p = probs[d - 1];
    const double n = d <= static_cast<int64_t>(reached.size()) ? reached[d - 1] : 0;
    const double g = tail / p;
    var += g * g * p * (1 - p) / (n + 2);
  }
  return std::min(static_cast<double>(length) + 1.0, total + *z * std::sqrt(var));
}

AutoTree::AutoTree(std::vector<std::unique_ptr<TreeShape>> shapes, std::vector<int64_t> widths)
    : widths_(std::move(widths)), owned_(std::move(shapes)) {
  for (const auto& s : owned_) shapes_.push_back(s.get());
  if (shapes_.empty()) throw Error(message("auto_no_candidates", {}));
  for (const TreeShape* s : shapes_) records_[s->name] = StepRecord{};
}

AutoTree::AutoTree(std::vector<const TreeShape*> shapes, std::vector<int64_t> widths)
    : widths_(std::move(widths)), shapes_(std::move(shapes)) {
  if (shapes_.empty()) throw Error(message("auto_no_candidates", {}));
  for (const TreeShape* s : shapes_) records_[s->name] = StepRecord{};
}

std::vector<const TreeShape*> AutoTree::candidates() const { return shapes_; }

std::unique_ptr<TreePolicy> AutoTree::for_request(const Sampler& sampler) const {
  // Greedy output is the same whatever runs; an unseeded request need not repeat.
  if (sampler.greedy() || !sampler.seeded()) return nullptr;
  return std::make_unique<SeededAutoTree>(shapes_, widths_);
}

SeededAutoTree::SeededAutoTree(std::vector<const TreeShape*> shapes, std::vector<int64_t> widths)
    : AutoTree(std::move(shapes), std::move(widths)) {
  costs_ = fixed_costs(widths_);
}

void SeededAutoTree::observe(const TreeShape& shape, const StepOutcome& step) {
  StepOutcome predicted = step;
  predicted.seconds = ran_seconds(shape, step);
  AutoTree::observe(shape, predicted);
}

double AutoTree::overhead(const TreeShape& shape) const {
  // Seconds a step takes beyond the per-method costs: the median over recent steps of the
  // same kind (chain or tree) when there are any, else of the other kind.
  const bool chain = as_chain(shape) != nullptr;
  const auto& mine = extra_.at(chain);
  const auto& extra = mine.empty() ? extra_.at(!chain) : mine;
  return extra.empty() ? 0.0 : median(extra);
}

double AutoTree::predicted_seconds(const TreeShape& shape) const {
  if (!costs_) return 0.0;
  return costs_->predict(shape, widths_) + overhead(shape);
}

double AutoTree::ran_seconds(const TreeShape& shape, const StepOutcome& step) const {
  return as_chain(shape) ? costs_->predict_chain(step.height, widths_)
                         : costs_->predict(shape, widths_);
}

double AutoTree::blend(const TreeShape& shape, double prior) const {
  const StepRecord& rec = records_.at(shape.name);
  if (!costs_) return rec.step_s();
  const double weight = contract::kAutoTimePriorSteps;
  return (rec.seconds + weight * prior) / (rec.steps + weight);
}

double AutoTree::step_seconds(const TreeShape& shape) const {
  return blend(shape, predicted_seconds(shape));
}

double AutoTree::optimistic_rate(const TreeShape& shape) const {
  const double seconds = step_seconds(shape);
  return seconds > 0 ? (shape.max_height + 1) / seconds : kInf;
}

std::optional<double> AutoTree::tokens(const TreeShape& shape, std::optional<double> z) const {
  if (const ChainShape* chain = as_chain(shape)) {
    if (!chain_steps_.steps) return std::nullopt;
    return chains_.expected_tokens(chain->length(), z);
  }
  const StepRecord& rec = records_.at(shape.name);
  if (!rec.steps) return std::nullopt;
  return double(rec.tokens) / rec.steps + z.value_or(0.0) * rec.standard_error();
}

double AutoTree::estimate(const TreeShape& shape) const {
  const auto t = tokens(shape);
  const double seconds = step_seconds(shape);
  return t && seconds > 0 ? *t / seconds : 0.0;
}

double AutoTree::upper_bound(const TreeShape& shape) const {
  // UCB1's widening z: an unlucky early estimate is retried eventually, not never.
  const double z = std::sqrt(2 * std::log(double(std::max<int64_t>(total_, 2))));
  const auto t = tokens(shape, z);
  // Optimistic in time too: a few slow steps must not condemn a shape that then never
  // runs again to correct them.
  const double prior = predicted_seconds(shape);
  const double seconds = std::min(blend(shape, prior), prior != 0.0 ? prior : kInf);
  if (!t || seconds <= 0 || seconds == kInf) return optimistic_rate(shape);
  return std::min(*t, double(shape.max_height + 1)) / seconds;
}

bool AutoTree::needs_costs() const {
  return !costs_ || (!remeasured_ && total_ >= contract::kAutoRemeasureAfter);
}

void AutoTree::use_costs(const StepCosts& costs) {
  if (costs_) {
    // The second measurement: the overheads were measured against the first table.
    remeasured_ = true;
    for (auto& [chain, extra] : extra_) extra.clear();
  }
  costs_ = costs;
}

const TreeShape& AutoTree::choose() {
  // Redone every step at first, then every 8 steps (a decision moves little by then).
  if (!current_ || total_ < 64 || total_ - decided_ >= 8) {
    // Once the drafter has given evidence, the longest chain stands for every chain (trim
    // cuts it to any of them); dispatcher.py's _choices.
    const ChainShape* longest = nullptr;
    for (const TreeShape* s : shapes_) {
      const ChainShape* c = as_chain(*s);
      if (c && (!longest || c->length() > longest->length())) longest = c;
    }
    const TreeShape* best = nullptr;
    double best_bound = 0;
    for (const TreeShape* s : shapes_) {  // the first maximum, as Python's max()
      if (!evidence_.empty() && as_chain(*s) && s != longest) continue;
      const double b = upper_bound(*s);
      if (!best || b > best_bound) {
        best = s;
        best_bound = b;
      }
    }
    current_ = best;
    decided_ = total_;
  }
  return *current_;
}

int64_t AutoTree::trim(const TreeShape& shape, int64_t offered, const std::string& evidence) {
  if (!costs_ || !as_chain(shape)) return offered;
  const auto it = evidence_.find(evidence);
  static const DepthAcceptance kUnseen;  // no copy of a seen one per step
  const DepthAcceptance& seen = it != evidence_.end() ? it->second : kUnseen;
  const std::vector<double> uppers = seen.borrowed_upper(offered, contract::kAutoTrimZ);
  const double extra = overhead(shape);
  int64_t best = 0;
  double best_rate = 0, tokens = 1, reach = 1;
  for (int64_t m = 0; m <= offered; ++m) {
    if (m) {
      reach *= uppers[m - 1];
      tokens += reach;
    }
    const double rate = tokens / (costs_->predict_chain(m, widths_) + extra);
    if (rate > best_rate) {
      best = m;
      best_rate = rate;
    }
  }
  return best;
}

void AutoTree::observe(const TreeShape& shape, const StepOutcome& step) {
  if (!step.follows_shape) return;
  ++total_;
  records_[shape.name].add(step.emitted(), step.seconds);
  const bool chain = as_chain(shape) != nullptr;
  if (costs_) {
    auto& extra = extra_[chain];
    extra.push_back(step.seconds - ran_seconds(shape, step));
    if (extra.size() > kExtraKept) extra.pop_front();
  }
  if (chain && as_chain(shape)->length() > 0) {  // drafting nothing teaches nothing
    chains_.observe(step.height, step.accepted, step.allowed);
    chain_steps_.add(step.emitted(), step.seconds);
    if (!step.evidence.empty() && step.height) {
      // Only depths the proposal offered: what a cut can choose among.
      evidence_[step.evidence].observe(step.height, step.accepted);
    }
  }
}

std::vector<std::unique_ptr<TreeShape>> auto_candidates(const TargetMetadata& target,
                                                        bool branching) {
  // No trees on a recipe that quantizes activations per row (contract.ROW_QUANTIZED_DTYPES):
  // a tree's other column order can flip a greedy token there.
  for (const char* dtype : contract::kRowQuantizedDtypes) {
    if (target.dtype == dtype) branching = false;
  }
  std::vector<std::unique_ptr<TreeShape>> shapes;
  auto add = [&](std::unique_ptr<TreeShape> s) {
    for (const auto& have : shapes) {
      if (have->name == s->name) return;
    }
    shapes.push_back(std::move(s));
  };
  add(std::make_unique<NoDraftShape>());
  const int64_t longest = std::min<int64_t>(target.verify_width - 1, contract::kAutoMaxChain);
  for (int64_t n = std::min<int64_t>(2, longest); n <= longest; ++n) {
    if (n >= 1) add(std::make_unique<ChainShape>(n));
  }
  for (int64_t w : target.verify_widths) {
    if (branching && w >= 4) add(std::make_unique<StaticTree>(StaticTree::pruned(w - 1)));
    if (branching && w >= 8) {
      add(std::make_unique<DynamicTree>(contract::default_dynamic_depth(w),
                                        contract::kDefaultDynamicTopk, w));
    }
  }
  return shapes;
}

}  // namespace etspec
