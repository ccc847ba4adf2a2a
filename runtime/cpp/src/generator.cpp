#include "generator.h"

#include <algorithm>
#include <set>
#include <sstream>

using executorch::runtime::EValue;

namespace etspec {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An attending target method: `inputs` (the mask last), then the band when the target has
// sliding layers (MaskLayout::band). `inputs` own the tensors the values point at.
std::vector<Tensor> run_attending(Program& target, const std::string& method,
                                  std::vector<executorch::extension::TensorPtr> inputs,
                                  std::vector<int64_t>& band) {
  if (!band.empty()) inputs.push_back(longs(band));
  return target.run(method, std::vector<EValue>(inputs.begin(), inputs.end()));
}

}  // namespace

// Stop rules of runtime/runner.py::_Sink: budget, EOS (kept), streaming.
class Sink {
 public:
  Sink(int64_t max_new, std::set<int64_t> eos, const TokenCallback& callback)
      : max_new_(max_new), eos_(std::move(eos)), callback_(callback) {}
  int64_t remaining() const {
    return stop.empty() ? max_new_ - static_cast<int64_t>(tokens.size()) : 0;
  }
  bool emit(const std::vector<int64_t>& offered) {
    std::vector<int64_t> take;
    for (int64_t t : offered) {
      if (static_cast<int64_t>(take.size()) >= remaining()) break;
      take.push_back(t);
      if (eos_.count(t)) {
        stop = contract::kStopEos;
        break;
      }
    }
    tokens.insert(tokens.end(), take.begin(), take.end());
    if (callback_) callback_(take);
    if (stop.empty() && static_cast<int64_t>(tokens.size()) >= max_new_) stop = contract::kStopBudget;
    return stop.empty();
  }
  std::vector<int64_t> tokens;
  std::string stop;

 private:
  int64_t max_new_;
  std::set<int64_t> eos_;
  const TokenCallback& callback_;
};

Stats::Stats() {
  for (const char* s : contract::kStages) stage_s[s] = 0.0;
}

void Stats::record_verify(int64_t proposed, int64_t accepted, int64_t height,
                          const std::string& shape) {
  ++verify_calls;
  drafted_tokens += proposed;
  accepted_tokens += accepted;
  if (!shape.empty()) ++shape_steps[shape];
  while (static_cast<int64_t>(proposed_pos.size()) < height) {
    proposed_pos.push_back(0);
    accept_pos.push_back(0);
  }
  for (int64_t i = 0; i < height; ++i) ++proposed_pos[i];
  for (int64_t i = 0; i < accepted; ++i) ++accept_pos[i];
}

namespace {

void write_json(std::ostream& o, int64_t v) { o << v; }
void write_json(std::ostream& o, double v) { o << v; }
void write_json(std::ostream& o, const std::vector<int64_t>& v) {
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
}
template <typename T>
void write_json(std::ostream& o, const std::map<std::string, T>& m) {
  o << "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    o << (first ? "" : ", ") << "\"" << k << "\": " << v;
    first = false;
  }
  o << "}";
}

}  // namespace

std::string Stats::to_json() const {
  std::ostringstream o;
  o.precision(9);
  const char* sep = "{";
#define ETSPEC_COUNTED(name) name
#define ETSPEC_DERIVED(name) name()
#define ETSPEC_FIELD(name, kind)        \
  o << sep << "\"" #name "\": ";        \
  write_json(o, ETSPEC_##kind(name)); \
  sep = ", ";
  ETSPEC_STATS_FIELDS(ETSPEC_FIELD)
#undef ETSPEC_FIELD
#undef ETSPEC_DERIVED
#undef ETSPEC_COUNTED
  o << "}";
  return o.str();
}

StageTimer::StageTimer(Stats& stats, const char* stage)
    : stats_(stats), stage_(stage), t0_(std::chrono::steady_clock::now()) {}
StageTimer::~StageTimer() { stats_.stage_s[stage_] += seconds_since(t0_); }

// --- runner ---------------------------------------------------------------------------

Runner::Runner(Program& target, Program* draft, bool assistant)
    : target_(target), meta_(target.target) {
  if (assistant) {
    draft_ = std::make_unique<Gemma4Assistant>(target);
  } else if (draft != nullptr) {
    draft_ = std::make_unique<Eagle3Draft>(*draft, meta_);
  }
  // Zeroed once: a request overwrites what it attends before reading it and masks the rest,
  // so stale (finite) entries of an earlier request are harmless, while zeroing the whole
  // cache per request cost what --max-seq allows (Gemma 3 270M at 8192: 302 MB, ~70 ms).
  target_.run(contract::kTARGET_RESET, {});
}

Result Runner::generate(const std::vector<int64_t>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const TokenCallback& callback) {
  // Everything a caller can get wrong is checked before any state changes; the messages
  // are runtime/runner.py's.
  const int64_t limit = meta_.max_context, n = prompt.size();
  if (prompt.empty()) throw Error(message("empty_prompt", {}));
  for (int64_t t : prompt) {
    if (t < 0 || t >= meta_.vocab_size) {
      throw Error(message("token_outside_vocab", {{"token", std::to_string(t)},
                                                  {"vocab", std::to_string(meta_.vocab_size)}}));
    }
  }
  if (options.max_new_tokens < 1) {
    throw Error(message("max_new_tokens_low", {{"value", std::to_string(options.max_new_tokens)}}));
  }
  if (n >= limit) {
    throw Error(message("prompt_fills_context",
                        {{"tokens", std::to_string(n)}, {"limit", std::to_string(limit)}}));
  }
  if (n + options.max_new_tokens > limit) {
    throw Error(message("prompt_exceeds_context",
                        {{"tokens", std::to_string(n)},
                         {"max_new", std::to_string(options.max_new_tokens)},
                         {"limit", std::to_string(limit)},
                         {"room", std::to_string(limit - n)}}));
  }
  if (options.shape != nullptr) {
    const Shape& shape = *options.shape;
    if (!draft_) throw Error("speculative decoding needs a draft: pass --draft DRAFT.pte");
    const std::string strategies = "," + meta_.kv_strategies + ",";
    if (strategies.find("," + options.kv_strategy + ",") == std::string::npos) {
      throw Error(message("kv_strategy_unsupported", {{"strategy", options.kv_strategy},
                                                      {"supported", meta_.kv_strategies}}));
    }
    if (shape.max_nodes + 1 > meta_.verify_width) {
      throw Error(message("tree_too_wide", {{"name", shape.name},
                                            {"nodes", std::to_string(shape.max_nodes)},
                                            {"need", std::to_string(shape.max_nodes + 1)},
                                            {"width", std::to_string(meta_.verify_width)}}));
    }
    draft_->check_shape(shape.name, shape.fed_nodes);
  }

  Result result;
  Stats& stats = result.stats;
  stats.prompt_tokens = n;
  std::set<int64_t> eos;
  if (!options.ignore_eos) eos.insert(meta_.eos_token_ids.begin(), meta_.eos_token_ids.end());
  Sink sink(options.max_new_tokens, eos, callback);
  const auto t0 = std::chrono::steady_clock::now();
  if (draft_) draft_->reset();

  // Chunked prefill (runtime/prefill.py): pad rows take the positions after the real ones.
  const int64_t chunk = meta_.prefill_chunk;
  const MaskLayout layout{meta_.max_context, meta_.cache_size, meta_.sliding_window};
  Tensor hidden;
  std::vector<float> logits;
  {
    StageTimer timer(stats, contract::kStagePrefill);
    for (int64_t lo = 0; lo < n; lo += chunk) {
      const int64_t real = std::min(chunk, n - lo);
      std::vector<int64_t> ids(chunk, 0), positions = iota(lo, chunk), last{real - 1};
      std::copy_n(prompt.begin() + lo, real, ids.begin());
      int64_t width = 0;
      std::vector<float> mask = layout.causal(positions, width);
      std::vector<int64_t> band = layout.band(lo, width);
      auto out = run_attending(target_, contract::kTARGET_PREFILL,
                               {longs(ids), longs(positions), longs(last),
                                floats(mask, chunk, width)},
                               band);
      logits = out[0].data;
      if (hidden.sizes.empty()) hidden.sizes = {0, out[1].cols()};
      hidden.data.insert(hidden.data.end(), out[1].data.begin(),
                         out[1].data.begin() + real * out[1].cols());
      hidden.sizes[0] += real;
    }
  }
  stats.prefill_calls += (n + chunk - 1) / chunk;
  const int64_t first = sampler.pick(logits.data(), meta_.vocab_size);
  const bool more = sink.emit({first});
  stats.ttft_s = seconds_since(t0);
  if (more) {
    if (options.shape != nullptr) {
      {
        StageTimer timer(stats, contract::kStageDraft);
        stats.draft_calls += draft_->prefill(prompt, first, hidden);
      }
      speculate(first, n, options, sampler, stats, sink);
    } else {
      int64_t token = first, position = n;
      while (sink.remaining() > 0) {
        std::vector<int64_t> tok{token}, pos{position};
        std::vector<Tensor> out;
        {
          StageTimer timer(stats, contract::kStageDecode);
          int64_t width = 0;
          std::vector<float> mask = layout.causal(pos, width);
          std::vector<int64_t> band = layout.band(position, width);
          out = run_attending(target_, contract::kTARGET_DECODE,
                              {longs(tok), longs(pos), floats(mask, 1, width)}, band);
        }
        ++stats.decode_calls;
        token = sampler.pick(out[0].data.data(), meta_.vocab_size);
        ++position;
        if (!sink.emit({token})) break;
      }
    }
  }
  stats.total_s = seconds_since(t0);
  stats.generated_tokens = sink.tokens.size();
  stats.memory[contract::kTargetWeightsBytes] = target_.weights_bytes;
  stats.memory[contract::kTargetKvBytes] = meta_.kv_cache_bytes;
  if (draft_) draft_->memory(stats.memory);
  result.token_ids = sink.tokens;
  result.stop_reason = sink.stop;
  return result;
}

void Runner::speculate(int64_t root, int64_t committed, const GenerateOptions& options,
                       Sampler& sampler, Stats& stats, Sink& sink) {
  const int64_t v = meta_.vocab_size, ctx = meta_.max_context;
  const MaskLayout layout{meta_.max_context, meta_.cache_size, meta_.sliding_window};
  const bool overwrite = options.kv_strategy == contract::kPositionOverwrite;
  const Shape& shape = *options.shape;
  while (sink.remaining() > 0) {
    // Never draft past the budget: a step emits its accepted path + one token.
    const int64_t height = sink.remaining() - 1;
    Proposal proposal;
    {
      StageTimer timer(stats, contract::kStageDraft);
      if (height > 0) {
        auto expansion = draft_->expansion();
        proposal = shape.grow(*expansion, height, sampler, *draft_);
      }
      stats.draft_calls += proposal.calls;
    }
    const int64_t m = proposal.tokens.size(), m1 = m + 1, c = committed;
    int64_t k = 0, max_depth = 0;
    std::vector<int64_t> tokens, positions, slots, depth(m1, 0);
    std::vector<std::vector<int64_t>> children(m1);
    std::vector<float> mask;
    int64_t s = 0;  // mask width
    {
      // Tensorize (runtime/speculative/kv_cache.py): row i at slot base + i with RoPE
      // position c + depth; it sees the committed prefix, its ancestors and itself; rows
      // past the tree see only their own slot.
      StageTimer timer(stats, contract::kStageTensorize);
      k = meta_.verify_width_for(m1);
      const int64_t base = overwrite ? c : ctx;
      slots.resize(k);
      positions.resize(k);
      tokens.assign(k, 0);
      tokens[0] = root;
      for (int64_t i = 1; i < m1; ++i) {
        const int64_t parent = proposal.parents[i - 1];
        if (parent < 0 || parent >= i) throw Error("draft tree parent out of order");
        tokens[i] = proposal.tokens[i - 1];
        depth[i] = depth[parent] + 1;
        max_depth = std::max(max_depth, depth[i]);
        children[parent].push_back(i);
      }
      s = layout.width(overwrite ? c + k : c);
      mask.assign(k * s, contract::kMaskMin);
      for (int64_t i = 0; i < k; ++i) {
        slots[i] = base + i;
        positions[i] = i < m1 ? c + depth[i] : c + m1 + (i - m1);
      }
      for (int64_t i = 0; i < k; ++i) {
        float* row = mask.data() + i * s;
        if (i >= m1) {
          row[layout.column(slots[i], s)] = 0.0f;
          continue;
        }
        std::fill_n(row, c, 0.0f);
        for (int64_t j = i;; j = proposal.parents[j - 1]) {
          row[layout.column(slots[j], s)] = 0.0f;
          if (j == 0) break;
        }
      }
    }
    // Nothing proposed (a lookup that found no match): the root alone is the one-row decode,
    // cheaper than the narrowest verify; it writes the root's committed slot directly.
    const bool alone = m1 == 1;
    std::vector<Tensor> out;
    {
      StageTimer timer(stats, contract::kStageVerify);
      if (alone) {
        std::vector<int64_t> tok{root}, pos{c};
        std::vector<float> causal = layout.causal(pos, s);
        std::vector<int64_t> band = layout.band(c, s);
        out = run_attending(target_, contract::kTARGET_DECODE,
                            {longs(tok), longs(pos), floats(causal, 1, s)}, band);
      } else {
        std::vector<int64_t> band = layout.band(c, s);
        out = run_attending(target_, meta_.verify_method(k),
                            {longs(tokens), longs(positions), longs(slots), floats(mask, k, s)},
                            band);
      }
    }
    const Tensor& logits = out[0];
    std::vector<int64_t> nodes{0};
    int64_t next = 0;
    {
      // Greedy: at each node take the child equal to the target's argmax; the first miss
      // emits the argmax. Sampling (runtime/speculative/verifier.py): try the children in
      // order, accept x with probability min(1, p(x)/q(x)), on rejection continue from
      // normalize(max(p - q, 0)); q is the draft's distribution for a sampled chain and a
      // point mass for a deterministic tree pick.
      StageTimer timer(stats, contract::kStageAccept);
      int64_t node = 0;
      while (true) {
        int64_t accepted = -1;
        if (sampler.greedy()) {
          const int64_t best = argmax(logits.row(node), v);
          for (int64_t ch : children[node]) {
            if (tokens[ch] == best) {
              accepted = ch;
              break;
            }
          }
          if (accepted < 0) {
            next = best;
            break;
          }
        } else {
          auto p = sampler.target_probs(logits.row(node), v);
          for (int64_t ch : children[node]) {
            const int64_t x = tokens[ch];
            const bool mass = proposal.q.empty();
            const double px = p[x], qx = mass ? 1.0 : proposal.q[ch - 1][x];
            if (qx > 0 && sampler.uniform() < std::min(1.0, px / qx)) {
              accepted = ch;
              break;
            }
            std::vector<float> r(p);
            if (mass) {
              r[x] = std::max(p[x] - 1.0f, 0.0f);
            } else {
              const auto& q = proposal.q[ch - 1];
              for (int64_t j = 0; j < v; ++j) r[j] = std::max(p[j] - q[j], 0.0f);
            }
            double total = 0;
            for (float y : r) total += y;
            if (total > 0) {  // p == q: the draft was exact (rejection had probability 0)
              for (auto& y : r) y = static_cast<float>(y / total);
              p = std::move(r);
            }
          }
          if (accepted < 0) {
            next = sampler.draw(p);
            break;
          }
        }
        node = accepted;
        nodes.push_back(node);
      }
    }
    const int64_t n = nodes.size();
    {
      // Commit by path index: the accepted rows go to c, c + 1, ...; a path already there
      // (a chain or first-branch path under position-overwrite) needs no call.
      StageTimer timer(stats, contract::kStageCommit);
      const int64_t w = meta_.verify_width, base = overwrite || alone ? c : ctx;
      std::vector<int64_t> src(w), dst(w);
      bool moved = false;
      for (int64_t i = 0; i < w; ++i) src[i] = dst[i] = base + i;
      for (int64_t i = 0; i < n; ++i) {
        src[i] = base + nodes[i];
        dst[i] = c + i;
        moved = moved || src[i] != dst[i];
      }
      if (moved) {
        target_.run(contract::kTARGET_COMMIT, {longs(src), longs(dst)});
        ++stats.commit_calls;
      }
    }
    stats.record_verify(m, n - 1, max_depth, shape.name);
    committed = c + n;
    std::vector<int64_t> path, emitted;
    for (int64_t i = 0; i < n; ++i) path.push_back(tokens[nodes[i]]);
    emitted.assign(path.begin() + 1, path.end());
    emitted.push_back(next);
    if (!sink.emit(emitted)) return;
    {
      StageTimer timer(stats, contract::kStageDraft);
      const int64_t th = out[1].cols();
      std::vector<float> hidden(n * th);
      for (int64_t i = 0; i < n; ++i) std::copy_n(out[1].row(nodes[i]), th, &hidden[i * th]);
      stats.draft_calls += draft_->accept(c, path, next, hidden);
    }
    root = next;
  }
}

}  // namespace etspec
