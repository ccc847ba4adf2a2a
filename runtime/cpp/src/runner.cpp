#include "runner.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "speculative/generator.h"

namespace etspec {
namespace {

bool weight_cache_from_env() {
  const char* env = std::getenv(contract::kWeightCacheEnv);
  if (!env) return true;
  std::string v(env);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return !(v == "0" || v == "false" || v == "off" || v == "no");
}

}  // namespace

// A method with a draft program of its own decodes target-only without one (the default,
// combined, does): an option another owner reads without a draft (--max-ngram: prompt
// lookup's) is refused rather than ignored, as runtime/loading.py's check_draftless.
static void check_draftless(const contract::RunSetting& row, bool has_draft,
                            const DraftMethod& method) {
  if (has_draft || !method.draft_program) return;
  const std::string owners = row.draft_methods;
  for (size_t start = 0; start < owners.size();) {
    const size_t end = std::min(owners.find(',', start), owners.size());
    const std::string owner = owners.substr(start, end - start);
    if (!draft_method(owner).draft_program) {
      throw Error(message("option_needs_method", {{"option", row.flag}, {"owner", owner}}));
    }
    start = end + 1;
  }
}

void LoadOptions::check(bool has_draft) const {
  const DraftMethod& method = etspec::draft_method(draft_method);
  for (const auto& [name, value] : draft.values) {
    const contract::RunSetting* row = run_setting_of("method." + name);
    if (row == nullptr) {
      throw Error(message("unknown_choice", {{"what", "draft method option"},
                                             {"value", name},
                                             {"choices", method_option_names()}}));
    }
    check_minimum(row->flag, value);
    check_owner(row->flag, true, "", method.name);
    check_draftless(*row, has_draft, method);
  }
  method.check(has_draft, draft);
  tree.check();
  if (std::find(std::begin(contract::kKvStrategies), std::end(contract::kKvStrategies),
                kv_strategy) == std::end(contract::kKvStrategies)) {
    std::string choices;
    for (const char* k : contract::kKvStrategies) {
      choices += (choices.empty() ? "" : ", ") + std::string(k);
    }
    throw Error(message("unknown_choice",
                        {{"what", "KV strategy"}, {"value", kv_strategy}, {"choices", choices}}));
  }
}

std::unique_ptr<Runner> Runner::load(const std::string& target, const std::string& draft,
                                     const LoadOptions& options) {
  options.check(!draft.empty());
  const DraftMethod& method = draft_method(options.draft_method);
  const bool cache = options.weight_cache.value_or(weight_cache_from_env());
  auto t = std::make_unique<TargetProgram>(target, cache);
  std::unique_ptr<DraftProgram> d;
  if (!draft.empty()) d = std::make_unique<DraftProgram>(draft, cache);
  std::unique_ptr<TokenGenerator> generator;
  if (!draft.empty() || !method.draft_program) {  // EAGLE-3 speculates only with a draft
    auto drafter = method.make(*t, d.get(), options.draft);
    auto policy = options.tree.policy(t->meta, *drafter);
    generator = std::make_unique<SpeculativeTokenGenerator>(std::move(drafter), t->meta,
                                                            std::move(policy), options.kv_strategy);
  }
  return std::make_unique<Runner>(std::move(t), std::move(d), std::move(generator));
}

Runner::Runner(std::unique_ptr<TargetProgram> target, std::unique_ptr<DraftProgram> draft,
               std::unique_ptr<TokenGenerator> generator)
    : target_(std::move(target)), draft_(std::move(draft)), generator_(std::move(generator)) {
  if (!generator_) generator_ = std::make_unique<TextTokenGenerator>();
  // A tokenizer this runtime cannot read leaves ids working; text prompts get the reason.
  if (auto json = target_->tokenizer_json()) {
    try {
      tokenizer_ = std::make_unique<Tokenizer>(*json);
    } catch (const Error& e) {
      tokenizer_error_ = e.what();
    }
  } else {
    tokenizer_error_ = message("no_tokenizer", {});
  }
  if (auto stored = target_->chat_template()) {
    chat_template_ = std::make_unique<ChatTemplate>(*stored);
  }
  // Zeroed once: a request overwrites what it attends before reading it and masks the rest,
  // so stale (finite) entries of an earlier request are harmless, while zeroing the whole
  // cache per request cost what --max-seq allows (Gemma 3 270M at 8192: 302 MB, ~70 ms).
  target_->run(contract::kTARGET_RESET, {});
}

Runner::~Runner() = default;

void Runner::reset() {
  std::lock_guard<std::mutex> lock(busy_);
  target_->run(contract::kTARGET_RESET, {});
  held_.forget();
  generator_->reset();
}

std::vector<int64_t> Runner::encode(const Prompt& prompt) const {
  if (!prompt.text) return prompt.ids;
  if (!tokenizer_) throw Error(tokenizer_error_);
  return tokenizer_->encode(*prompt.text);
}

std::vector<int64_t> Runner::chat_ids(const std::string& messages) const {
  if (!chat_template_) throw Error(message("no_chat_template", {}));
  if (!tokenizer_) throw Error(tokenizer_error_);
  return tokenizer_->encode(chat_template_->render(messages), false);  // it writes <bos>
}

std::string Runner::decode(const std::vector<int64_t>& ids) const {
  return tokenizer_ ? tokenizer_->decode(ids) : "";
}

Result Runner::generate(const Prompt& prompt, const GenerationConfig& config,
                        const TextCallback& on_text, const StatsCallback& on_stats,
                        const TokenCallback& on_tokens) {
  std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
  if (!lock.owns_lock()) {
    throw Error("this Runner is generating in another thread; give each thread its own "
                "Runner::load");
  }
  stop_ = false;
  TokenCallback callback;
  if (on_text || on_tokens) {
    callback = [&](const std::vector<int64_t>& ids, const std::string& text) {
      const bool keep = on_tokens ? on_tokens(ids, text) : true;
      if (on_text && !text.empty()) on_text(text);
      return keep;
    };
  }
  Result result = generate_ids(encode(prompt), config, callback);
  if (on_stats) on_stats(result.stats);
  return result;
}

Result Runner::generate_ids(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                            const TokenCallback& callback) {
  // Everything a caller can get wrong is checked before any state changes (the contract's
  // messages, as runtime/runner.py's).
  const auto& meta = target_->meta;
  const int64_t limit = meta.max_context, n = prompt.size();
  if (prompt.empty()) throw Error(message("empty_prompt", {}));
  for (int64_t t : prompt) {
    if (t < 0 || t >= meta.vocab_size) {
      throw Error(message("token_outside_vocab", {{"token", std::to_string(t)},
                                                  {"vocab", std::to_string(meta.vocab_size)}}));
    }
  }
  int64_t max_new = config.max_new_tokens;
  if (max_new == -1) {
    max_new = std::max<int64_t>(1, std::min<int64_t>(contract::kDefaultMaxNewTokens, limit - n));
  }
  if (max_new < 1) {
    throw Error(message("max_new_tokens_low", {{"value", std::to_string(max_new)}}));
  }
  if (n >= limit) {
    throw Error(message("prompt_fills_context",
                        {{"tokens", std::to_string(n)}, {"limit", std::to_string(limit)}}));
  }
  if (max_new > limit - n) {  // not n + max_new > limit: that overflows for huge max_new
    throw Error(message("prompt_exceeds_context",
                        {{"tokens", std::to_string(n)},
                         {"max_new", std::to_string(max_new)},
                         {"limit", std::to_string(limit)},
                         {"room", std::to_string(limit - n)}}));
  }
  std::optional<Sampler> own;
  if (!config.sampler) own.emplace(config.sampling);  // checks the settings
  Sampler& sampler = config.sampler ? *config.sampler : *own;

  Result result;
  Stats& stats = result.stats;
  stats.prompt_tokens = n;
  std::set<int64_t> eos;
  if (!config.ignore_eos) eos.insert(meta.eos_token_ids.begin(), meta.eos_token_ids.end());
  std::optional<StreamDecoder> decoder;
  if (tokenizer_ && callback) decoder.emplace(*tokenizer_);
  Sink sink(prompt, max_new, eos, decoder ? &*decoder : nullptr, callback, &stop_);
  const auto t0 = std::chrono::steady_clock::now();
  generator_->reset();
  PrefillResult pre;
  const bool needs_hidden = generator_->needs_hidden();
  const int64_t start = config.reuse_prefix ? held_.reusable(prompt, needs_hidden) : 0;
  held_.truncate(start);
  {
    StageTimer timer(stats, contract::kStagePrefill);
    pre = prefill_target(*target_, prompt, start);
    if (needs_hidden) {  // the draft reads the whole prompt's states: the kept rows, then these
      const int64_t cols = pre.hidden.cols();
      held_.keep_hidden(start, pre.hidden.data.data(), n - start, cols, limit);
      pre.hidden.data.assign(held_.hidden(), held_.hidden() + n * cols);
      pre.hidden.sizes = {n, cols};
    }
  }
  stats.cached_tokens = start;
  stats.prefill_calls += pre.calls;
  const int64_t first = sampler.pick(pre.logits.data(), meta.vocab_size, n);
  const bool more = sink.emit({first});
  stats.ttft_s = seconds_since(t0);
  int64_t committed = n;
  if (more) {
    GenerationContext ctx{*target_, sampler, stats, prompt, pre, first, held_};
    committed = generator_->generate(ctx, sink);
  }
  const auto& history = sink.history();  // the prompt, then what was emitted
  held_.hold({history.begin(), history.begin() + std::min<int64_t>(committed, history.size())});
  stats.total_s = seconds_since(t0);
  stats.generated_tokens = sink.tokens.size();
  stats.memory[contract::kTargetWeightsBytes] = target_->weights_bytes();
  stats.memory[contract::kTargetKvBytes] = meta.kv_cache_bytes;
  generator_->memory(stats.memory);
  result.token_ids = sink.tokens;
  result.stop_reason = sink.stop;
  result.text = decode(sink.tokens);
  if (decoder) {
    const std::string tail = decoder->flush(&result.text);
    if (!tail.empty()) callback({}, tail);
  }
  return result;
}

}  // namespace etspec
