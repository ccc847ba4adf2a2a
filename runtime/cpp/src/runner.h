// runtime/runner.py's TextLLMRunner: request checks, prefill, the first token, then the
// token generator it was built with (target-only or speculative), stats and memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator.h"

namespace etspec {

struct Result {
  std::vector<int64_t> token_ids;
  std::string stop_reason;  // a contract::kStop*
  Stats stats;
};

struct GenerateOptions {
  int64_t max_new_tokens = contract::kDefaultMaxNewTokens;
  bool ignore_eos = false;
};

class Runner {
 public:
  // `generator`: how tokens after the first are produced (null: one target_decode each).
  explicit Runner(TargetProgram& target, std::unique_ptr<TokenGenerator> generator = nullptr);
  Result generate(const std::vector<int64_t>& prompt, const GenerateOptions& options,
                  Sampler& sampler, const TokenCallback& callback);
  const TargetMetadata& meta() const { return target_.meta; }

 private:
  TargetProgram& target_;
  std::unique_ptr<TokenGenerator> generator_;
};

}  // namespace etspec
