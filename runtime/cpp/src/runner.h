// runtime/runner.py's TextLLMRunner, and the library's entry point: load a target .pte (and
// a draft, or a draft method), then generate from text or token ids with streamed text, a
// stats callback and stop().
//
//   auto runner = etspec::Runner::load("target.pte", "draft.pte");
//   etspec::GenerationConfig config;
//   config.max_new_tokens = 64;
//   auto result = runner->generate("def fib(n):", config,
//                                  [](const std::string& text) { std::cout << text; });
//
// Thread rules: a Runner generates one request at a time; a second generate() while one
// runs (from another thread) throws Error instead of waiting. stop() may be called from any
// thread, or from a callback: the running generate() returns after its current step with
// stop_reason "stop" (or "callback" when a token callback returned false). Callbacks run on
// the generating thread. Separate Runners (separate loads) may generate in parallel threads;
// with the XNNPACK weight cache on (the default) their delegate calls take turns on one
// process-wide lock, so they share the CPU rather than multiply throughput.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat.h"
#include "generator.h"
#include "prefix_cache.h"
#include "speculative/registry.h"
#include "speculative/settings.h"
#include "tokenizer.h"

namespace etspec {

// How to load: the draft method, its options, the tree and the KV strategy (RunnerSpec in
// runtime/loading.py; the CLI flags of `etspec generate`).
struct LoadOptions {
  std::string draft_method = contract::kDefaultDraftMethod;
  DraftOptions draft;
  TreeSettings tree;
  std::string kv_strategy = contract::kDefaultKvStrategy;
  // XNNPACK packs each weight once for all methods; nullopt: on unless
  // ETSPEC_XNNPACK_WEIGHT_CACHE is 0/false/off/no.
  std::optional<bool> weight_cache;
  // Refuses what can be refused before anything loads (Error with the Python message).
  void check(bool has_draft) const;
};

struct GenerationConfig {
  // -1: contract::kDefaultMaxNewTokens, or what the context still holds (`etspec generate`).
  int64_t max_new_tokens = -1;
  SamplingConfig sampling;
  bool ignore_eos = false;
  // Draw from this random stream (kept across calls) instead of a new one from `sampling`.
  Sampler* sampler = nullptr;
  // Prefill only what follows the prompt's common prefix with the tokens the KV cache
  // holds from the last request (a conversation's turns before); false: from position 0.
  bool reuse_prefix = false;
};

// Text (encoded with the target's tokenizer) or token ids.
struct Prompt {
  Prompt(std::string text) : text(std::move(text)) {}
  Prompt(const char* text) : text(text) {}
  Prompt(std::vector<int64_t> ids) : ids(std::move(ids)) {}
  std::optional<std::string> text;
  std::vector<int64_t> ids;
};

struct Result {
  std::vector<int64_t> token_ids;
  std::string text;         // "" when the target carries no tokenizer this runner can read
  std::string stop_reason;  // a contract::kStop*
  Stats stats;
};

using TextCallback = std::function<void(const std::string& text)>;
using StatsCallback = std::function<void(const Stats& stats)>;

class Runner {
 public:
  // Loads `target` and, for EAGLE-3, `draft` ("" for target-only or a method that needs no
  // draft file). Throws Error, one line, for anything a user can get wrong.
  static std::unique_ptr<Runner> load(const std::string& target, const std::string& draft = "",
                                      const LoadOptions& options = {});
  // The parts, for a caller that builds its own generator; null generator: target-only.
  Runner(std::unique_ptr<TargetProgram> target, std::unique_ptr<DraftProgram> draft,
         std::unique_ptr<TokenGenerator> generator);
  ~Runner();

  // Generates after `prompt`. on_text gets each piece of text as it completes (never a
  // split character); on_stats the stats at the end; on_tokens each emission's ids with
  // their text, and returning false stops. The pieces concatenate to Result::text.
  Result generate(const Prompt& prompt, const GenerationConfig& config = {},
                  const TextCallback& on_text = nullptr, const StatsCallback& on_stats = nullptr,
                  const TokenCallback& on_tokens = nullptr);
  // Asks a running generate() to stop after its current step; safe from any thread.
  void stop() { stop_ = true; }
  // Clears every cache: the target's and the generator's.
  void reset();
  // What --tree auto measured per candidate so far, as a JSON object ("" for none:
  // target-only or a fixed shape); not thread-safe against a running generate().
  std::string policy_report() { return generator_ ? generator_->policy_report() : ""; }

  std::vector<int64_t> encode(const Prompt& prompt) const;
  // The prompt ids of `messages` rendered by the target's chat template up to the
  // assistant's turn (runtime/chat.py's chat_ids); Error without a template or tokenizer.
  std::vector<int64_t> chat_ids(const std::string& messages_json) const;
  const ChatTemplate* chat_template() const { return chat_template_.get(); }
  std::string decode(const std::vector<int64_t>& ids) const;
  // The tokenizer, or null when the target has none or one this runtime cannot read (then
  // text prompts are refused with the reason, and ids still work).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const TargetMetadata& meta() const { return target_->meta; }
  int64_t vocab_size() const { return target_->meta.vocab_size; }

 private:
  Result generate_ids(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                      const TokenCallback& callback);

  std::unique_ptr<TargetProgram> target_;
  std::unique_ptr<DraftProgram> draft_;
  std::unique_ptr<TokenGenerator> generator_;  // after the programs it refers to
  PrefixCache held_;  // what the target's KV holds between requests
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string tokenizer_error_;
  std::unique_ptr<ChatTemplate> chat_template_;  // null: none stored (a base model)
  std::atomic<bool> stop_{false};
  std::mutex busy_;
};

}  // namespace etspec
