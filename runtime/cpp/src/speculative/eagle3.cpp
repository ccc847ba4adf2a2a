#include "speculative/eagle3.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace etspec {

void truncate_to_window(std::vector<float>& mask, const std::vector<int64_t>& positions,
                        int64_t width, int64_t committed, int64_t window) {
  if (window <= 0) return;
  for (size_t r = 0; r < positions.size(); ++r) {
    const int64_t cut = std::min(positions[r] - window + 1, committed);
    if (cut > 0) std::fill_n(mask.data() + r * width, cut, contract::kMaskMin);
  }
}

Eagle3DraftRunner::Eagle3DraftRunner(DraftProgram& program, const TargetMetadata& target,
                                     int64_t window)
    : program_(program), window_(window), target_vocab_(target.vocab_size) {
  if (window < 0) throw Error(message("draft_window", {{"value", std::to_string(window)}}));
  const DraftMetadata& meta = program.meta;
  if (meta.draft_method != contract::kEagle3) {
    throw Error(program.path() + ": draft method '" + meta.draft_method +
                "' is not supported by this runner (eagle3)");
  }
  check_pair(target, meta);
  const auto d2t = program.constant(contract::kDRAFT_D2T);
  if (d2t.size() != 1 || !d2t[0].isTensor() ||
      d2t[0].toTensor().numel() != meta.draft_vocab_size) {
    throw Error(message("d2t_size", {{"path", program.path()}}));
  }
  const int64_t* offsets = d2t[0].toTensor().const_data_ptr<int64_t>();
  target_ids_.resize(meta.draft_vocab_size);
  for (int64_t i = 0; i < meta.draft_vocab_size; ++i) {
    target_ids_[i] = i + offsets[i];
    if (target_ids_[i] < 0 || target_ids_[i] >= target_vocab_) {
      throw Error(message("d2t_range", {{"path", program.path()}}));
    }
  }
}

Proposal Eagle3DraftRunner::propose(const TreeShape& shape, int64_t max_height,
                                    Sampler& sampler) {
  if (shape.max_nodes == 0) return {};  // a decode: the draft stays behind
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t calls = catch_up();
  const double extend_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Eagle3Expansion expansion(program_, root_, window_);
  expansion.target_ids = &target_ids_;
  expansion.vocab_size = target_vocab_;
  Proposal out = shape.grow(expansion, max_height, sampler);
  if (calls) {
    out.calls += calls;
    out.extend_calls = calls;
    out.extend_s = extend_s;
  }
  return out;
}

void Eagle3DraftRunner::check_shape(const TreeShape& shape) const {
  // Fed nodes take scratch slots, and a call's pad rows the slots after them.
  const std::string& name = shape.name;
  const int64_t fed_nodes = shape.fed_nodes, step_width = program_.meta.step_width;
  // Compared without the sum (a fed count held at the largest int64 must not wrap below).
  if (fed_nodes > scratch() - step_width) {
    const bool held = fed_nodes > std::numeric_limits<int64_t>::max() - step_width;
    const std::string need = held ? "(more than int64)" : std::to_string(fed_nodes + step_width);
    throw Error(message("draft_scratch", {{"name", name},
                                          {"fed", std::to_string(fed_nodes)},
                                          {"scratch", std::to_string(scratch())},
                                          {"step_width", std::to_string(step_width)},
                                          {"need", need}}));
  }
}

void Eagle3DraftRunner::memory(std::map<std::string, int64_t>& out) const {
  out[contract::kDraftWeightsBytes] = program_.weights_bytes();
  out[contract::kDraftKvBytes] = program_.meta.kv_cache_bytes;
}

void Eagle3DraftRunner::reset() {
  program_.run(contract::kDRAFT_RESET, {});
  root_ = DraftRoot{};
  behind_.clear();
  pending_ = false;
}

int64_t Eagle3DraftRunner::prefill(const std::vector<int64_t>& prompt, int64_t first,
                             const Tensor& hidden) {
  // Queued, not run: the first proposal runs it (catch_up), so a request whose steps never
  // draft (a draft that does not pay here) costs no draft call at all.
  behind_.clear();
  pending_ = true;
  pending_prompt_ = prompt;
  pending_first_ = first;
  pending_hidden_ = hidden;
  return 0;
}

int64_t Eagle3DraftRunner::run_prefill() {
  pending_ = false;
  const std::vector<int64_t>& prompt = pending_prompt_;
  const int64_t first = pending_first_;
  const Tensor& hidden = pending_hidden_;
  // Row j pairs the target state at j with the token at j + 1 (the EAGLE alignment).
  std::vector<int64_t> tokens(prompt.begin() + 1, prompt.end());
  tokens.push_back(first);
  const int64_t n = program_.meta.prefill_chunk, total = prompt.size(), th = hidden.cols();
  int64_t calls = 0;
  for (int64_t lo = 0; lo < total; lo += n) {
    const int64_t real = std::min(n, total - lo);
    std::vector<int64_t> ids(n, 0), positions = iota(lo, n), last{real - 1};
    std::copy_n(tokens.begin() + lo, real, ids.begin());
    std::vector<float> states(n * th, 0.0f);
    std::copy_n(hidden.row(lo), real * th, states.begin());
    int64_t width = 0;
    std::vector<float> mask = layout().causal(positions, width);
    auto out = program_.run(contract::kDRAFT_PREFILL, {longs(ids), floats(states, n, th),
                                                       longs(positions), longs(last),
                                                       floats(mask, n, width)});
    root_.logits = std::move(out[0].data);
    root_.state = std::move(out[1].data);
    ++calls;
  }
  root_.position = total;
  if (window_ > 0 && total > window_) {
    // The prefill's own mask is full-causal; recompute the last row (the first proposal's
    // root) under the window. Its K/V row depends only on its inputs (one draft layer), so
    // rewriting it leaves the cache as it was.
    const int64_t e = program_.meta.extend_width_for(1);
    std::vector<int64_t> ids(e, 0), positions = iota(total - 1, e), slots = positions;
    ids[0] = tokens.back();
    std::vector<float> states(e * th, 0.0f);
    std::copy_n(hidden.row(total - 1), th, states.begin());
    int64_t width = 0;
    std::vector<float> mask = causal(positions, width);
    auto out = program_.run(program_.meta.extend_method(e),
                            {longs(ids), floats(states, e, th), longs(positions), longs(slots),
                             floats(mask, e, width)});
    root_.logits.assign(out[0].row(0), out[0].row(0) + out[0].cols());
    root_.state.assign(out[1].row(0), out[1].row(0) + out[1].cols());
    ++calls;
  }
  return calls;
}

DraftCosts Eagle3DraftRunner::step_costs(const CostProbe& probe) {
  const DraftMetadata& dm = program_.meta;
  auto timed = [&](const std::string& method, int64_t rows, int64_t state_width) {
    CostProbe::Inputs in = probe.scratch_inputs(rows, layout());
    std::vector<float> states(rows * state_width, 0.0f);
    return probe.timed(program_, method,
                       {longs(in.tokens), floats(states, rows, state_width), longs(in.positions),
                        longs(in.slots), floats(in.mask, rows, in.columns)});
  };
  DraftCosts costs;
  costs.step_width = dm.step_width;
  costs.step_s = timed(contract::kDRAFT_STEP, dm.step_width, dm.hidden_size);
  // Every width runs once here, so no method is first loaded inside a timed step; most
  // steps accept a few tokens, so the narrowest extend is the typical cost.
  const int64_t width = dm.target_hidden_size * dm.hidden_state_layers.size();
  for (auto it = dm.extend_widths.rbegin(); it != dm.extend_widths.rend(); ++it) {
    costs.extend_s = timed(dm.extend_method(*it), *it, width);  // the narrowest last: kept
  }
  return costs;
}

int64_t Eagle3DraftRunner::accept(const Acceptance& acceptance) {
  behind_.push_back(acceptance);
  return 0;
}

int64_t Eagle3DraftRunner::catch_up() {
  int64_t calls = pending_ ? run_prefill() : 0;
  if (behind_.empty()) return calls;
  const int64_t start = behind_.front().position, last_next = behind_.back().next_token;
  std::vector<int64_t> tokens;
  std::vector<float> hidden;
  for (const auto& a : behind_) {
    tokens.insert(tokens.end(), a.tokens.begin(), a.tokens.end());
    hidden.insert(hidden.end(), a.hidden.begin(), a.hidden.end());
  }
  behind_.clear();
  const int64_t total = tokens.size(), th = hidden.size() / total;
  const auto& widths = program_.meta.extend_widths;
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  for (int64_t lo = 0; lo < total; lo += widest, ++calls) {
    const int64_t hi = std::min(lo + widest, total);
    extend(start + lo, {tokens.begin() + lo, tokens.begin() + hi},
           hi < total ? tokens[hi] : last_next,
           {hidden.begin() + lo * th, hidden.begin() + hi * th});
  }
  return calls;
}

void Eagle3DraftRunner::extend(int64_t position, const std::vector<int64_t>& tokens,
                               int64_t next, const std::vector<float>& hidden) {
  const DraftMetadata& meta = program_.meta;
  const int64_t rows = tokens.size(), e = meta.extend_width_for(rows);
  const int64_t th = hidden.size() / rows;
  std::vector<int64_t> ids(e, 0);
  std::copy(tokens.begin() + 1, tokens.end(), ids.begin());
  ids[rows - 1] = next;
  std::vector<float> states(e * th, 0.0f);
  std::copy(hidden.begin(), hidden.end(), states.begin());
  std::vector<int64_t> positions = iota(position, e), slots = positions;
  int64_t s = 0;
  std::vector<float> mask = causal(positions, s);
  auto out = program_.run(meta.extend_method(e),
                          {longs(ids), floats(states, e, th), longs(positions), longs(slots),
                           floats(mask, e, s)});
  root_.logits.assign(out[0].row(rows - 1), out[0].row(rows - 1) + out[0].cols());
  root_.state.assign(out[1].row(rows - 1), out[1].row(rows - 1) + out[1].cols());
  root_.position = position + rows;
}

std::vector<float> Eagle3DraftRunner::causal(const std::vector<int64_t>& positions,
                                             int64_t& width) const {
  std::vector<float> mask = layout().causal(positions, width);
  truncate_to_window(mask, positions, width, layout().committed(width), window_);
  return mask;
}

Eagle3Expansion::Eagle3Expansion(DraftProgram& program, const DraftRoot& root, int64_t window)
    : program_(program), root_(root), window_(window),
      scratch_(program.meta.cache_size - program.meta.max_context) {
  const int64_t handles = scratch_ + 1, h = root.state.size();
  states_.assign(handles * h, 0.0f);
  std::copy(root.state.begin(), root.state.end(), states_.begin());
  seen_.assign(handles * scratch_, contract::kMaskMin);
  position = root.position;
}

std::vector<std::vector<float>> Eagle3Expansion::expand(const std::vector<int64_t>& parents,
                                                        const std::vector<int64_t>& tokens) {
  const auto& meta = program_.meta;
  const int64_t w = meta.step_width, base = meta.max_context;
  const int64_t scratch = scratch_, h = root_.state.size(), pos = root_.position;
  // Columns: the committed prefix [0, pos), then the scratch slots from column ctx.
  const MaskLayout layout{meta.max_context, meta.cache_size};
  const int64_t s = layout.width(pos), ctx = layout.committed(s);
  std::vector<std::vector<float>> out;
  for (size_t lo = 0; lo < parents.size(); lo += w) {
    const int64_t n = std::min<int64_t>(w, parents.size() - lo), first = fed_;
    if (first + w > scratch) {
      throw Error(message("scratch_exhausted", {{"scratch", std::to_string(scratch)}}));
    }
    // Pad rows copy the root: finite inputs, outputs never read, slots never seen.
    std::vector<int64_t> index(w, 0), ids(w, 0), positions(w, pos);
    std::vector<int64_t> slots = iota(base + first, w);
    for (int64_t r = 0; r < n; ++r) {
      index[r] = parents[lo + r];
      ids[r] = tokens[lo + r];
      positions[r] = pos + depth_[index[r]];
    }
    std::vector<float> mask(w * s, contract::kMaskMin), in(w * h);
    for (int64_t r = 0; r < w; ++r) {
      float* row = mask.data() + r * s;
      std::fill_n(row, pos, 0.0f);  // the committed prefix
      std::copy_n(seen_.data() + index[r] * scratch, scratch, row + ctx);
      row[ctx + first + r] = 0.0f;  // every row sees itself
      std::copy_n(states_.data() + index[r] * h, h, in.data() + r * h);
    }
    truncate_to_window(mask, positions, s, ctx, window_);
    auto res = program_.run(contract::kDRAFT_STEP,
                                   {longs(ids), floats(in, w, h), longs(positions), longs(slots),
                                    floats(mask, w, s)});
    ++calls;
    for (int64_t r = 0; r < n; ++r) {
      std::copy_n(res[1].row(r), h, states_.data() + (first + 1 + r) * h);
      std::copy_n(mask.data() + r * s + ctx, scratch, seen_.data() + (first + 1 + r) * scratch);
      depth_.push_back(depth_[index[r]] + 1);
      out.emplace_back(res[0].row(r), res[0].row(r) + res[0].cols());
    }
    fed_ += n;
  }
  return out;
}

}  // namespace etspec
