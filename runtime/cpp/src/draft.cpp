#include "draft.h"

#include <algorithm>

namespace etspec {

Eagle3Draft::Eagle3Draft(Program& program, const TargetMetadata& target)
    : program_(program), meta_(program.draft) {
  target_vocab_ = target.vocab_size;
  if (meta_.draft_method != contract::kEagle3) {
    throw Error(program.path() + ": draft method '" + meta_.draft_method +
                "' is not supported by this runner (eagle3)");
  }
  check_pair(target, meta_);
  const auto d2t = program.constant(contract::kDRAFT_D2T);
  if (d2t.size() != 1 || !d2t[0].isTensor() ||
      d2t[0].toTensor().numel() != meta_.draft_vocab_size) {
    throw Error(message("d2t_size", {{"path", program.path()}}));
  }
  const int64_t* offsets = d2t[0].toTensor().const_data_ptr<int64_t>();
  target_ids_.resize(meta_.draft_vocab_size);
  for (int64_t i = 0; i < meta_.draft_vocab_size; ++i) {
    target_ids_[i] = i + offsets[i];
    if (target_ids_[i] < 0 || target_ids_[i] >= target_vocab_) {
      throw Error(message("d2t_range", {{"path", program.path()}}));
    }
  }
}

std::unique_ptr<Expander> Eagle3Draft::expansion() {
  return std::make_unique<Expansion>(*this);
}

void Eagle3Draft::check_shape(const std::string& name, int64_t fed_nodes) const {
  // Fed nodes take scratch slots, and a call's pad rows the slots after them.
  const int64_t need = fed_nodes + meta_.step_width;
  if (need > scratch()) {
    throw Error(message("draft_scratch", {{"name", name},
                                          {"fed", std::to_string(fed_nodes)},
                                          {"scratch", std::to_string(scratch())},
                                          {"step_width", std::to_string(meta_.step_width)},
                                          {"need", std::to_string(need)}}));
  }
}

void Eagle3Draft::memory(std::map<std::string, int64_t>& out) const {
  out[contract::kDraftWeightsBytes] = program_.weights_bytes;
  out[contract::kDraftKvBytes] = meta_.kv_cache_bytes;
}

void Eagle3Draft::reset() {
  program_.run(contract::kDRAFT_RESET, {});
  pos_ = 0;
}

int64_t Eagle3Draft::prefill(const std::vector<int64_t>& prompt, int64_t first,
                             const Tensor& hidden) {
  // Row j pairs the target state at j with the token at j + 1 (the EAGLE alignment).
  std::vector<int64_t> tokens(prompt.begin() + 1, prompt.end());
  tokens.push_back(first);
  const int64_t n = meta_.prefill_chunk, total = prompt.size(), th = hidden.cols();
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
    logits_ = std::move(out[0].data);
    hidden_ = std::move(out[1].data);
    ++calls;
  }
  pos_ = total;
  return calls;
}

int64_t Eagle3Draft::accept(int64_t position, const std::vector<int64_t>& tokens, int64_t next,
                            const std::vector<float>& hidden) {
  const int64_t rows = tokens.size(), e = meta_.extend_width_for(rows);
  const int64_t th = hidden.size() / rows;
  std::vector<int64_t> ids(e, 0);
  std::copy(tokens.begin() + 1, tokens.end(), ids.begin());
  ids[rows - 1] = next;
  std::vector<float> states(e * th, 0.0f);
  std::copy(hidden.begin(), hidden.end(), states.begin());
  std::vector<int64_t> positions = iota(position, e), slots = positions;
  int64_t s = 0;
  std::vector<float> mask = layout().causal(positions, s);
  auto out = program_.run(meta_.extend_method(e),
                          {longs(ids), floats(states, e, th), longs(positions), longs(slots),
                           floats(mask, e, s)});
  logits_.assign(out[0].row(rows - 1), out[0].row(rows - 1) + out[0].cols());
  hidden_.assign(out[1].row(rows - 1), out[1].row(rows - 1) + out[1].cols());
  pos_ = position + rows;
  return 1;
}

Expansion::Expansion(Eagle3Draft& draft) : draft_(draft) {
  const int64_t handles = draft.scratch() + 1, h = draft.hidden_.size();
  states_.assign(handles * h, 0.0f);
  std::copy(draft.hidden_.begin(), draft.hidden_.end(), states_.begin());
  seen_.assign(handles * draft.scratch(), contract::kMaskMin);
}

std::vector<std::vector<float>> Expansion::expand(const std::vector<int64_t>& parents,
                                                  const std::vector<int64_t>& tokens) {
  const auto& meta = draft_.meta_;
  const int64_t w = meta.step_width, base = meta.max_context;
  const int64_t scratch = draft_.scratch(), h = draft_.hidden_.size(), pos = draft_.pos_;
  // Columns: the committed prefix [0, pos), then the scratch slots from column ctx.
  const int64_t s = draft_.layout().width(pos), ctx = draft_.layout().committed(s);
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
    auto res = draft_.program_.run(contract::kDRAFT_STEP,
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

// --- Gemma 4 assistant -----------------------------------------------------------------

Gemma4Assistant::Gemma4Assistant(Program& target)
    : program_(target), width_(target.target.assistant_step_width) {
  if (target.target.assistant != contract::kGemma4Assistant ||
      !target.has_method(contract::kASSISTANT_STEP)) {
    throw Error(message("no_assistant", {}));
  }
  target_vocab_ = target.target.vocab_size;
  target_ids_ = iota(0, target_vocab_);
}

int64_t Gemma4Assistant::prefill(const std::vector<int64_t>& prompt, int64_t first,
                                 const Tensor& hidden) {
  token_ = first;
  const int64_t last = hidden.sizes[0] - 1;
  state_.assign(hidden.row(last), hidden.row(last) + hidden.cols());
  pos_ = prompt.size();
  return 0;
}

int64_t Gemma4Assistant::accept(int64_t position, const std::vector<int64_t>& tokens,
                                int64_t next, const std::vector<float>& hidden) {
  const int64_t hb = hidden.size() / tokens.size();
  token_ = next;
  state_.assign(hidden.end() - hb, hidden.end());
  pos_ = position + tokens.size();
  return 0;
}

void Gemma4Assistant::run(const std::vector<int64_t>& tokens, const std::vector<float>& states,
                          std::vector<std::vector<float>>& logits, std::vector<float>& out) {
  const int64_t w = width_, hb = state_.size(), n = tokens.size();
  std::vector<int64_t> position{pos_};
  for (int64_t lo = 0; lo < n; lo += w) {
    const int64_t rows = std::min(w, n - lo);
    std::vector<int64_t> ids(w, 0);
    std::copy_n(tokens.begin() + lo, rows, ids.begin());
    std::vector<float> fed(w * hb, 0.0f);
    std::copy_n(states.begin() + lo * hb, rows * hb, fed.begin());
    auto res = program_.run(contract::kASSISTANT_STEP,
                            {longs(ids), floats(fed, w, hb), longs(position)});
    for (int64_t r = 0; r < rows; ++r) {
      logits.emplace_back(res[0].row(r), res[0].row(r) + res[0].cols());
      out.insert(out.end(), res[1].row(r), res[1].row(r) + hb);
    }
  }
}

std::unique_ptr<Expander> Gemma4Assistant::expansion() {
  return std::make_unique<AssistantExpansion>(*this);
}

AssistantExpansion::AssistantExpansion(Gemma4Assistant& assistant) : assistant_(assistant) {
  std::vector<std::vector<float>> logits;
  assistant.run({assistant.token_}, assistant.state_, logits, states_);
  root_ = std::move(logits[0]);
  calls = 1;
}

std::vector<std::vector<float>> AssistantExpansion::expand(const std::vector<int64_t>& parents,
                                                           const std::vector<int64_t>& tokens) {
  const int64_t hb = assistant_.state_size();
  std::vector<float> in(parents.size() * hb);
  for (size_t r = 0; r < parents.size(); ++r) {
    std::copy_n(states_.data() + parents[r] * hb, hb, in.data() + r * hb);
  }
  std::vector<std::vector<float>> logits;
  assistant_.run(tokens, in, logits, states_);
  calls += (static_cast<int64_t>(tokens.size()) + assistant_.width() - 1) / assistant_.width();
  return logits;
}

}  // namespace etspec
