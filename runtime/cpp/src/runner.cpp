#include "runner.h"

#include <set>

namespace etspec {

Runner::Runner(TargetProgram& target, std::unique_ptr<TokenGenerator> generator)
    : target_(target), generator_(std::move(generator)) {
  if (!generator_) generator_ = std::make_unique<TextTokenGenerator>();
  // Zeroed once: a request overwrites what it attends before reading it and masks the rest,
  // so stale (finite) entries of an earlier request are harmless, while zeroing the whole
  // cache per request cost what --max-seq allows (Gemma 3 270M at 8192: 302 MB, ~70 ms).
  target_.run(contract::kTARGET_RESET, {});
}

Result Runner::generate(const std::vector<int64_t>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const TokenCallback& callback) {
  // Everything a caller can get wrong is checked before any state changes (the contract's
  // messages, as runtime/runner.py's).
  const auto& meta = target_.meta;
  const int64_t limit = meta.max_context, n = prompt.size();
  if (prompt.empty()) throw Error(message("empty_prompt", {}));
  for (int64_t t : prompt) {
    if (t < 0 || t >= meta.vocab_size) {
      throw Error(message("token_outside_vocab", {{"token", std::to_string(t)},
                                                  {"vocab", std::to_string(meta.vocab_size)}}));
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

  Result result;
  Stats& stats = result.stats;
  stats.prompt_tokens = n;
  std::set<int64_t> eos;
  if (!options.ignore_eos) eos.insert(meta.eos_token_ids.begin(), meta.eos_token_ids.end());
  Sink sink(prompt, options.max_new_tokens, eos, callback);
  const auto t0 = std::chrono::steady_clock::now();
  generator_->reset();
  PrefillResult pre;
  {
    StageTimer timer(stats, contract::kStagePrefill);
    pre = prefill_target(target_, prompt);
  }
  stats.prefill_calls += pre.calls;
  const int64_t first = sampler.pick(pre.logits.data(), meta.vocab_size);
  const bool more = sink.emit({first});
  stats.ttft_s = seconds_since(t0);
  if (more) {
    GenerationContext ctx{target_, sampler, stats, prompt, pre, first};
    generator_->generate(ctx, sink);
  }
  stats.total_s = seconds_since(t0);
  stats.generated_tokens = sink.tokens.size();
  stats.memory[contract::kTargetWeightsBytes] = target_.weights_bytes();
  stats.memory[contract::kTargetKvBytes] = meta.kv_cache_bytes;
  generator_->memory(stats.memory);
  result.token_ids = sink.tokens;
  result.stop_reason = sink.stop;
  return result;
}

}  // namespace etspec
