// The token-generator seam (runtime/generator.py): the runner prefills the prompt and emits
// the first token; a generator produces the rest. TextTokenGenerator runs one target_decode
// per token; SpeculativeTokenGenerator (speculative/generator.h) drafts and verifies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prefill.h"
#include "prefix_cache.h"
#include "program.h"
#include "sampler.h"
#include "sink.h"
#include "stats.h"

namespace etspec {

// What a generator needs to continue a prefilled sequence; nothing is hidden elsewhere.
// The target KV holds the prompt; `first_token` has been emitted and is not yet in the KV.
struct GenerationContext {
  TargetProgram& target;
  Sampler& sampler;
  Stats& stats;
  const std::vector<int64_t>& prompt;
  const PrefillResult& prefill;  // hidden: of the whole prompt, when needs_hidden()
  int64_t first_token;
  PrefixCache& held;  // the target's KV record: a generator keeps hidden rows it commits
};

class TokenGenerator {
 public:
  virtual ~TokenGenerator() = default;
  // Produces the tokens after the first until the sink says stop; returns how many
  // positions the target's committed KV then holds.
  virtual int64_t generate(GenerationContext& ctx, Sink& sink) = 0;
  // Whether it reads the target's hidden states (the runner keeps them with the KV).
  virtual bool needs_hidden() const { return false; }
  // Called at the start of every request, before the prefill.
  virtual void reset() {}
  // Bytes this generator adds beyond the target (draft weights and KV).
  virtual void memory(std::map<std::string, int64_t>& out) const {}
  // What its tree policy measured per candidate (TreePolicy::report); "" for none.
  virtual std::string policy_report() { return ""; }
};

class TextTokenGenerator : public TokenGenerator {
 public:
  int64_t generate(GenerationContext& ctx, Sink& sink) override;
};

}  // namespace etspec
