#include "speculative/costs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "stats.h"
#include "speculative/draft_runner.h"

namespace etspec {

namespace {

// statistics.median: the mean of the two middle values of an even count.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double median(const std::deque<double>& d) { return median(std::vector<double>(d.begin(), d.end())); }

}  // namespace

const char* const kDecodeCall = contract::kCostDecode;
const char* const kDraftCall = contract::kCostDraft;
const char* const kExtendCall = contract::kCostExtend;

std::string verify_key(int64_t width) { return contract::kCostVerify + std::to_string(width); }

const char* step_kind(int64_t max_nodes, int64_t max_height) {
  if (max_nodes == 0) return contract::kStepDecode;
  return max_nodes == max_height ? contract::kStepChain : contract::kStepTree;
}

std::string host_key(const std::string& kind, int64_t width) {
  return kind + std::to_string(width);
}

double StepCosts::predict(const TreeShape& shape, const std::vector<int64_t>& widths,
                          bool model) const {
  const char* kind = step_kind(shape.max_nodes, shape.max_height);
  const auto it = overhead_s.find(kind);
  const double overhead = it == overhead_s.end() ? 0.0 : it->second;
  if (shape.max_nodes == 0) return decode_s + overhead;
  int64_t width = widths.back();
  for (int64_t w : widths) {
    if (w >= shape.max_nodes + 1) {
      width = w;
      break;
    }
  }
  // The kind's host work at this width, else (not yet priced) the kind's (step.py).
  const auto at = overhead_s.find(host_key(kind, width));
  double seconds = verify_s.at(width) + (at == overhead_s.end() ? overhead : at->second);
  if (model) {  // the extend that catches the draft up, then its levels
    const int64_t per_call = std::max<int64_t>(step_width, 1);
    const int64_t levels =
        std::max<int64_t>(shape.levels, (shape.fed_nodes + per_call - 1) / per_call);
    const bool tree = shape.max_nodes != shape.max_height;
    const double level = tree && tree_level_s ? tree_level_s : draft_s;
    seconds += (extend_s ? extend_s : draft_s) + levels * level;
  }
  return seconds;
}

double StepCosts::predict_chain(int64_t length, const std::vector<int64_t>& widths,
                                bool model) const {
  if (length == 0) return predict(NoDraftShape(), widths, model);
  return predict(ChainShape(length), widths, model);
}

CostModel::CostModel(std::vector<int64_t> widths, int64_t step_width)
    : widths_(std::move(widths)), step_width_(step_width) {
  std::sort(widths_.begin(), widths_.end());
}

void CostModel::observe_call(const std::string& key, double seconds) {
  auto& window = calls_[key];
  auto& at = calls_at_[key];
  window.push_back(seconds);
  at.push_back(steps_);
  if (window.size() > contract::kAutoCostWindow) {
    window.pop_front();
    at.pop_front();
  }
  costs_.reset();
}

void CostModel::forget_stale() {
  const int64_t since = steps_ - contract::kAutoStaleSteps + 1;
  for (auto it = calls_at_.begin(); it != calls_at_.end();) {
    auto& at = it->second;
    auto& window = calls_[it->first];
    while (!at.empty() && at.front() < since) {
      at.pop_front();
      window.pop_front();
    }
    if (at.empty()) {
      calls_.erase(it->first);
      it = calls_at_.erase(it);
    } else {
      ++it;
    }
  }
}

void CostModel::add_probe(const StepCosts& probe) {
  if (probe.step_width) step_width_ = probe.step_width;
  std::vector<std::pair<std::string, double>> timed;
  for (const auto& [w, s] : probe.verify_s) timed.emplace_back(verify_key(w), s);
  timed.emplace_back(kDecodeCall, probe.decode_s);
  timed.emplace_back(kDraftCall, probe.draft_s);
  timed.emplace_back(kExtendCall, probe.extend_s);
  for (const auto& [key, seconds] : timed) {
    if (seconds <= 0) continue;
    probe_[key] = seconds;
    calls_.erase(key);  // a fresh probe replaces a call's step times
    calls_at_.erase(key);
  }
  costs_.reset();
}

void CostModel::observe(const std::string& kind, const StepOutcome& step) {
  ++steps_;
  if (step.rows) {
    observe_call(kind == contract::kStepDecode ? kDecodeCall : verify_key(step.rows), step.target_s);
  }
  // The catch-up once per step, then the levels per call; with no level call the rest of
  // the draft's time is host work (costs.py).
  if (step.extend_calls) observe_call(kExtendCall, step.extend_s);
  const int64_t levels = step.draft_calls - step.extend_calls;
  double host = step.seconds - step.target_s - step.draft_s;
  if (levels > 0) {
    const double level_s = (step.draft_s - step.extend_s) / levels;
    if (kind == contract::kStepTree) {
      auto& tree = levels_[kind];
      tree.push_back(level_s);
      if (tree.size() > contract::kAutoCostWindow) tree.pop_front();
    } else {
      observe_call(kDraftCall, level_s);
    }
  } else if (step.draft_calls) {
    host += step.draft_s - step.extend_s;
  }
  // Per kind of step and per kind and verify width (costs.py).
  std::vector<std::string> keys{kind};
  if (kind != contract::kStepDecode && step.rows) keys.push_back(host_key(kind, step.rows));
  for (const auto& key : keys) {
    auto& window = overhead_[key];
    window.push_back(std::max(host, 0.0));
    if (window.size() > contract::kAutoCostWindow) window.pop_front();
    overhead_seen_[key] = steps_;
  }
  forget_stale();
  // A kind of step (or one of its widths) not run for kAutoStaleSteps steps forgets its
  // host work (costs.py).
  for (auto it = overhead_seen_.begin(); it != overhead_seen_.end();) {
    if (steps_ - it->second >= contract::kAutoStaleSteps) {
      overhead_.erase(it->first);
      levels_.erase(it->first);
      it = overhead_seen_.erase(it);
    } else {
      ++it;
    }
  }
  costs_.reset();
}

bool CostModel::ready() const {
  for (int64_t w : widths_) {
    if (!probe_.count(verify_key(w))) return false;
  }
  return true;
}

std::optional<double> CostModel::call(const std::string& key, double scale) const {
  const auto window = calls_.find(key);
  const bool seen = window != calls_.end() && !window->second.empty();
  if (seen && window->second.size() >= contract::kAutoCostMinCalls) return median(window->second);
  const auto probed = probe_.find(key);
  if (probed != probe_.end()) return probed->second * scale;
  if (seen) return median(window->second);
  return std::nullopt;
}

size_t CostModel::evidence(const std::string& key) const {
  const auto window = calls_.find(key);
  if (window == calls_.end() || window->second.size() < contract::kAutoCostMinCalls) return 0;
  return window->second.size();
}

std::vector<double> ordered(const std::vector<double>& prices, const std::vector<size_t>& evidence) {
  const size_t n = prices.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return evidence[a] > evidence[b]; });
  std::vector<std::optional<double>> settled(n);
  for (size_t i : order) {
    double below = 0.0, above = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < i; ++j) {
      if (settled[j]) below = std::max(below, *settled[j]);
    }
    for (size_t j = i + 1; j < n; ++j) {
      if (settled[j]) above = std::min(above, *settled[j]);
    }
    settled[i] = std::min(std::max(prices[i], below), above);
  }
  std::vector<double> out;
  out.reserve(n);
  for (const auto& p : settled) out.push_back(*p);
  return out;
}

double CostModel::scale() const {
  std::vector<double> ratios;
  for (const auto& [key, window] : calls_) {
    const auto probed = probe_.find(key);
    if (key == kDraftCall || key == kExtendCall || window.size() < contract::kAutoCostMinCalls ||
        probed == probe_.end() || probed->second == 0) {
      continue;
    }
    ratios.push_back(median(window) / probed->second);
  }
  return ratios.empty() ? 1.0 : median(ratios);
}

const StepCosts& CostModel::costs() {
  if (!costs_) {
    const double s = scale();
    StepCosts c;
    const std::optional<double> decode = call(kDecodeCall, s);
    // A verify never costs less than a decode or a narrower verify, nor more than a wider
    // one, the better-evidenced price standing (costs.py ordered).
    std::vector<std::string> keys;
    if (decode) keys.push_back(kDecodeCall);
    for (int64_t w : widths_) keys.push_back(verify_key(w));
    std::vector<double> raw;
    std::vector<size_t> evidences;
    for (const auto& key : keys) {
      raw.push_back(call(key, s).value_or(0.0));
      evidences.push_back(evidence(key));
    }
    const std::vector<double> prices = ordered(raw, evidences);
    const size_t first = decode ? 1 : 0;
    for (size_t i = 0; i < widths_.size(); ++i) c.verify_s[widths_[i]] = prices[first + i];
    c.draft_s = call(kDraftCall, 1.0).value_or(0.0);
    c.extend_s = call(kExtendCall, 1.0).value_or(0.0);
    const auto tree = levels_.find(contract::kStepTree);
    if (tree != levels_.end() && tree->second.size() >= contract::kAutoCostMinCalls) {
      c.tree_level_s = median(tree->second);
    }
    c.step_width = step_width_;
    c.decode_s = decode ? prices.front() : c.verify_s.at(widths_.front());
    // Host work is priced once a kind of step has run kAutoCostMinCalls times; before, a
    // kind costs a decode's host work, the least any step does (costs.py).
    for (const auto& [kind, window] : overhead_) {
      if (window.size() >= contract::kAutoCostMinCalls) c.overhead_s[kind] = median(window);
    }
    const auto decode_host = c.overhead_s.find(contract::kStepDecode);
    if (decode_host != c.overhead_s.end()) {
      const double least = decode_host->second;
      for (const char* kind : {contract::kStepChain, contract::kStepTree}) {
        c.overhead_s.emplace(kind, least);
      }
    }
    costs_ = std::move(c);
  }
  return *costs_;
}

double CostProbe::timed(Program& program, const std::string& method,
                        const std::vector<executorch::extension::TensorPtr>& inputs) const {
  const std::vector<executorch::runtime::EValue> values(inputs.begin(), inputs.end());
  if (warm_up) program.run(method, values);
  double least = 0;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    program.run(method, values);
    const double s = seconds_since(t0);
    least = i == 0 ? s : std::min(least, s);
  }
  return least;
}

CostProbe::Inputs CostProbe::scratch_inputs(int64_t width, const MaskLayout& layout) const {
  Inputs in;
  in.rows = width;
  in.columns = layout.width(std::min(context, layout.max_context));
  in.mask.assign(width * in.columns, contract::kMaskMin);
  for (int64_t r = 0; r < width; ++r) {
    in.tokens.push_back(r % 2);
    in.positions.push_back(r);
    in.slots.push_back(layout.max_context + r);
    in.mask[r * in.columns + layout.column(in.slots.back(), in.columns)] = 0.0f;
  }
  in.band = layout.band(0, in.columns);
  return in;
}

CostProbe::Inputs CostProbe::decode_inputs(int64_t position, const MaskLayout& layout) const {
  Inputs in;
  in.rows = 1;
  in.columns = layout.width(std::max(position + 1, std::min(context, layout.max_context)));
  in.mask.assign(in.columns, contract::kMaskMin);
  in.mask[position] = 0.0f;
  in.tokens = {1};
  in.positions = {position};
  in.band = layout.band(position, in.columns);
  return in;
}

StepCosts measure_costs(TargetProgram& target, SpeculativeDraftRunner* draft, int64_t position,
                        const CostProbe& probe) {
  const auto& meta = target.meta;
  const MaskLayout layout{meta.max_context, meta.cache_size, meta.sliding_window};
  const std::vector<int64_t>& widths = meta.verify_widths;
  const bool decode = position >= 0 && position < meta.max_context;
  const bool drafts = draft != nullptr;
  std::map<int64_t, double> verify;
  double decode_s = 0, step_s = 0, extend_s = 0;
  int64_t step_width = 0;
  // Rounds that each time every call once: a burst of background work then slows every
  // call of a round alike, not one call's every repeat.
  for (int64_t r = 0; r < probe.repeats; ++r) {
    CostProbe once = probe;
    once.repeats = 1;
    once.warm_up = probe.warm_up && r == 0;
    const auto keep = [r](double& least, double s) { least = r == 0 ? s : std::min(least, s); };
    for (int64_t w : widths) {
      CostProbe::Inputs in = once.scratch_inputs(w, layout);
      std::vector<executorch::extension::TensorPtr> inputs = {
          longs(in.tokens), longs(in.positions), longs(in.slots),
          floats(in.mask, in.rows, in.columns)};
      if (!in.band.empty()) inputs.push_back(longs(in.band));
      keep(verify[w], once.timed(target, meta.verify_method(w), inputs));
    }
    if (decode) {
      CostProbe::Inputs in = once.decode_inputs(position, layout);
      std::vector<executorch::extension::TensorPtr> inputs = {
          longs(in.tokens), longs(in.positions), floats(in.mask, in.rows, in.columns)};
      if (!in.band.empty()) inputs.push_back(longs(in.band));
      keep(decode_s, once.timed(target, contract::kTARGET_DECODE, inputs));
    }
    if (drafts) {
      const DraftCosts drafted = draft->step_costs(once);
      step_width = drafted.step_width;
      keep(step_s, drafted.step_s);
      keep(extend_s, drafted.extend_s);
    }
  }
  StepCosts costs;
  costs.verify_s = verify;
  costs.step_width = step_width;
  costs.decode_s = decode_s;
  if (drafts) {
    costs.draft_s = step_s > 0 ? step_s : extend_s;
    costs.extend_s = extend_s > 0 ? extend_s : step_s;
  }
  // Load the commit too (copying scratch slots onto themselves): a tree's first commit
  // must not pay the method load inside a timed step.
  std::vector<int64_t> scratch = iota(meta.max_context, meta.verify_width);
  target.run(contract::kTARGET_COMMIT, {longs(scratch), longs(scratch)});
  return costs;
}

}  // namespace etspec
