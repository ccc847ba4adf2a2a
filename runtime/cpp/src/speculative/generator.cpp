#include "speculative/generator.h"

#include <algorithm>

#include "speculative/costs.h"
#include "speculative/kv_cache.h"
#include "speculative/tree.h"

namespace etspec {

void check_shape_fits(const TreeShape& shape, const TargetMetadata& target) {
  if (shape.max_nodes >= target.verify_width) {  // not max_nodes + 1 >: INT64_MAX overflows
    const uint64_t need = static_cast<uint64_t>(shape.max_nodes) + 1;
    throw Error(message("tree_too_wide", {{"name", shape.name},
                                          {"nodes", std::to_string(shape.max_nodes)},
                                          {"need", std::to_string(need)},
                                          {"width", std::to_string(target.verify_width)}}));
  }
}

SpeculativeTokenGenerator::SpeculativeTokenGenerator(
    std::unique_ptr<SpeculativeDraftRunner> draft, const TargetMetadata& target,
    std::unique_ptr<TreePolicy> policy, std::string kv_strategy)
    : draft_(std::move(draft)), policy_(std::move(policy)), kv_strategy_(std::move(kv_strategy)) {
  const std::string strategies = "," + target.kv_strategies + ",";
  if (strategies.find("," + kv_strategy_ + ",") == std::string::npos) {
    throw Error(message("kv_strategy_unsupported",
                        {{"strategy", kv_strategy_}, {"supported", target.kv_strategies}}));
  }
  draft_->check_target(target);
  for (const TreeShape* shape : policy_->candidates()) {
    check_shape_fits(*shape, target);
    draft_->check_shape(*shape);
  }
}

void SpeculativeTokenGenerator::generate(GenerationContext& ctx, Sink& sink) {
  Stats& stats = ctx.stats;
  const auto& meta = ctx.target.meta;
  {
    StageTimer timer(stats, contract::kStageDraft);
    stats.draft_calls += draft_->prefill(ctx.prompt, ctx.first_token, ctx.prefill.hidden);
  }
  const std::unique_ptr<TreePolicy> own = policy_->for_request(ctx.sampler);
  TreePolicy& policy = own ? *own : *policy_;
  SpecKVCacheManager kv(meta, kv_strategy_, ctx.prompt.size());
  int64_t root = ctx.first_token;
  while (sink.remaining() > 0) {
    // --tree auto's cost model: before the first step, and again (warm) at the step that
    // reaches kAutoRemeasureAfter, within the request that got there (generator.py).
    if (policy.needs_costs()) {
      policy.use_costs(measure_costs(ctx.target, draft_.get(), kv.committed()));
    }
    const TreeShape& shape = policy.choose();
    const auto t0 = std::chrono::steady_clock::now();
    // Never draft past the budget: a step emits its accepted path + one token.
    const int64_t height = sink.remaining() - 1;
    Proposal proposal;
    {
      StageTimer timer(stats, contract::kStageDraft);
      if (height > 0) proposal = draft_->propose(shape, height, ctx.sampler);
      stats.draft_calls += proposal.calls;
    }
    int64_t allowed = std::min(shape.max_height, height);
    if (!proposal.evidence.empty() && proposal.label.empty()) {
      const int64_t offered = proposal.tokens.size();
      const int64_t keep = policy.trim(shape, offered, proposal.evidence);
      if (keep < offered) {
        proposal = proposal.prefix(keep);
        allowed = keep;
      }
    }
    DraftTree tree;
    VerifyCall call;
    {
      StageTimer timer(stats, contract::kStageTensorize);
      tree = DraftTree::build(root, proposal);
      call = kv.verify_inputs(tree);
    }
    const int64_t position = kv.committed();
    std::vector<Tensor> out;
    {
      StageTimer timer(stats, contract::kStageVerify);
      out = call.run(ctx.target);
    }
    Verdict verdict;
    {
      StageTimer timer(stats, contract::kStageAccept);
      verdict = verifier_.verify(tree, out[0], ctx.sampler, proposal.q, meta.vocab_size);
    }
    {
      StageTimer timer(stats, contract::kStageCommit);
      stats.commit_calls += kv.commit(ctx.target, verdict.nodes);
    }
    stats.record_verify(tree.size(), verdict.accepted(), tree.max_depth,
                        proposal.label.empty() ? shape.name : proposal.label);
    const int64_t n = verdict.nodes.size();
    Acceptance acceptance;
    acceptance.position = position;
    acceptance.next_token = verdict.next_token;
    for (int64_t i = 0; i < n; ++i) acceptance.tokens.push_back(tree.tokens[verdict.nodes[i]]);
    std::vector<int64_t> emitted(acceptance.tokens.begin() + 1, acceptance.tokens.end());
    emitted.push_back(verdict.next_token);
    if (!sink.emit(emitted)) return;
    {
      StageTimer timer(stats, contract::kStageDraft);
      if (draft_->needs_hidden()) {
        const int64_t th = out[1].cols();
        acceptance.hidden.resize(n * th);
        for (int64_t i = 0; i < n; ++i) {
          std::copy_n(out[1].row(verdict.nodes[i]), th, &acceptance.hidden[i * th]);
        }
      }
      stats.draft_calls += draft_->accept(acceptance);
    }
    const StepOutcome outcome{tree.max_depth, verdict.accepted(), seconds_since(t0),
                              allowed,        proposal.label.empty(), proposal.evidence};
    policy.observe(shape, outcome);
    draft_->observe(outcome);
    root = verdict.next_token;
  }
}

}  // namespace etspec
