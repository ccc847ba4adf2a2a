#include "speculative/generator.h"

#include <algorithm>
#include <tuple>

#include "speculative/costs.h"
#include "speculative/kv_cache.h"
#include "speculative/shapes.h"
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
  // Trees a drafter branches on, and scratch rows, are refused on a target whose recipe
  // quantizes activations per row (contract.ROW_QUANTIZED_DTYPES): generator.py check_exact.
  const bool row_quantized = target.row_quantized();
  if (row_quantized && kv_strategy_ != contract::kPositionOverwrite) {
    throw Error(message("inexact_kv", {{"strategy", kv_strategy_}, {"dtype", target.dtype}}));
  }
  draft_->check_target(target);
  for (const TreeShape* shape : policy_->candidates()) {
    check_shape_fits(*shape, target);
    draft_->check_shape(*shape);
    if (row_quantized && draft_->branching() && !dynamic_cast<const ChainShape*>(shape)) {
      throw Error(message("inexact_tree", {{"name", shape->name}, {"dtype", target.dtype}}));
    }
  }
}

int64_t SpeculativeTokenGenerator::generate(GenerationContext& ctx, Sink& sink) {
  Stats& stats = ctx.stats;
  const auto& meta = ctx.target.meta;
  {
    StageTimer timer(stats, contract::kStageDraft);
    stats.draft_calls += draft_->prefill(ctx.prompt, ctx.first_token, ctx.prefill.hidden);
  }
  TreePolicy& policy = *policy_;
  policy.begin();
  SpecKVCacheManager kv(meta, kv_strategy_, ctx.prompt.size());
  const NoDraftShape nothing;
  int64_t root = ctx.first_token;
  while (sink.remaining() > 0) {
    // The cost probe, before the runner's first step (generator.py).
    if (policy.needs_costs()) {
      policy.use_costs(measure_costs(ctx.target, draft_.get(), kv.committed()));
    }
    // Never draft past the budget: a step emits its accepted path + one token.
    const int64_t height = sink.remaining() - 1;
    std::optional<Offer> offer;
    if (height > 0 && policy.takes_offers()) {
      offer = draft_->offer(std::min(height, meta.verify_width - 1));
    }
    const Choice choice =
        height > 0 ? policy.choose(offer ? &*offer : nullptr, height) : Choice{&nothing, 0};
    std::optional<StepOutcome> step =
        choice.decodes() ? decode(ctx, sink, kv, root)
                         : speculate(ctx, sink, kv, root, choice, offer ? &*offer : nullptr, height);
    if (!step) break;
    policy.observe(choice, *step);
    if (offer && !choice.lookup) {
      const std::vector<int64_t>& history = sink.history();
      policy.shadow(*offer, history.data() + history.size() - step->emitted(), step->emitted());
    }
  }
  return kv.committed();
}

std::optional<StepOutcome> SpeculativeTokenGenerator::decode(GenerationContext& ctx, Sink& sink,
                                                             SpecKVCacheManager& kv,
                                                             int64_t& root) {
  // A step that proposes nothing: one target decode, as target-only decoding runs it, and
  // the draft only told what was committed (a model draft queues it and catches up in one
  // call when it next proposes).
  Stats& stats = ctx.stats;
  const auto& meta = ctx.target.meta;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t position = kv.committed();
  VerifyCall call = kv.decode_inputs(root);
  std::vector<Tensor> out;
  {
    StageTimer timer(stats, contract::kStageDecode);
    out = call.run(ctx.target);
  }
  const double target_s = seconds_since(t0);
  ++stats.decode_calls;
  stats.record_decode();
  const int64_t token = ctx.sampler.pick(out[0].row(0), meta.vocab_size, position + 1);
  kv.commit(ctx.target, {0});
  Acceptance acceptance;
  if (draft_->needs_hidden()) {
    acceptance.hidden.assign(out[1].row(0), out[1].row(0) + out[1].cols());
    ctx.held.keep_hidden(position, acceptance.hidden.data(), 1, out[1].cols(), meta.max_context);
  }
  if (!sink.emit({token})) return std::nullopt;
  acceptance.position = position;
  acceptance.tokens = {root};
  acceptance.next_token = token;
  {
    StageTimer timer(stats, contract::kStageDraft);
    stats.draft_calls += draft_->accept(acceptance);
  }
  root = token;
  StepOutcome step;
  step.seconds = seconds_since(t0);
  step.target_s = target_s;
  step.rows = 1;
  return step;
}

std::optional<StepOutcome> SpeculativeTokenGenerator::speculate(GenerationContext& ctx, Sink& sink,
                                                                SpecKVCacheManager& kv,
                                                                int64_t& root, const Choice& choice,
                                                                const Offer* offer,
                                                                int64_t height) {
  // A step that verifies a proposal: the offer's first choice.lookup tokens, or the model's
  // choice.shape.
  Stats& stats = ctx.stats;
  const auto& meta = ctx.target.meta;
  const TreeShape& shape = *choice.shape;
  const auto t0 = std::chrono::steady_clock::now();
  Proposal proposal;
  {
    StageTimer timer(stats, contract::kStageDraft);
    if (choice.lookup) {
      proposal.tokens.assign(offer->tokens.begin(), offer->tokens.begin() + choice.lookup);
      for (int64_t i = 0; i < choice.lookup; ++i) proposal.parents.push_back(i);
    } else {
      proposal = draft_->propose(shape, height, ctx.sampler);
    }
    stats.draft_calls += proposal.calls;
  }
  double draft_s = seconds_since(t0);
  DraftTree tree;
  VerifyCall call;
  {
    StageTimer timer(stats, contract::kStageTensorize);
    tree = DraftTree::build(root, proposal);
    call = kv.verify_inputs(tree);
  }
  const int64_t position = kv.committed();
  std::vector<Tensor> out;
  const auto t1 = std::chrono::steady_clock::now();
  {
    StageTimer timer(stats, contract::kStageVerify);
    out = call.run(ctx.target);
  }
  const double target_s = seconds_since(t1);
  Verdict verdict;
  {
    StageTimer timer(stats, contract::kStageAccept);
    verdict = verifier_.verify(tree, out[0], ctx.sampler, proposal.q, meta.vocab_size,
                               position + 1);
  }
  {
    StageTimer timer(stats, contract::kStageCommit);
    stats.commit_calls += kv.commit(ctx.target, verdict.nodes);
  }
  stats.record_verify(tree.size(), verdict.accepted(), tree.max_depth,
                      choice.lookup ? contract::kLookupLabel : shape.name);
  const int64_t n = verdict.nodes.size();
  Acceptance acceptance;
  acceptance.position = position;
  acceptance.next_token = verdict.next_token;
  for (int64_t i = 0; i < n; ++i) acceptance.tokens.push_back(tree.tokens[verdict.nodes[i]]);
  if (draft_->needs_hidden()) {
    const int64_t th = out[1].cols();
    acceptance.hidden.resize(n * th);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(out[1].row(verdict.nodes[i]), th, &acceptance.hidden[i * th]);
    }
    ctx.held.keep_hidden(position, acceptance.hidden.data(), n, th, meta.max_context);
  }
  std::vector<int64_t> emitted(acceptance.tokens.begin() + 1, acceptance.tokens.end());
  emitted.push_back(verdict.next_token);
  if (!sink.emit(emitted)) return std::nullopt;
  const auto t2 = std::chrono::steady_clock::now();
  int64_t calls = 0;
  {
    StageTimer timer(stats, contract::kStageDraft);
    calls = draft_->accept(acceptance);
    stats.draft_calls += calls;
  }
  if (calls) draft_s += seconds_since(t2);
  root = verdict.next_token;
  StepOutcome step;
  step.height = tree.max_depth;
  step.accepted = verdict.accepted();
  step.seconds = seconds_since(t0);
  step.allowed = choice.lookup ? choice.lookup : std::min(shape.max_height, height);
  if (choice.lookup) step.evidence = offer->evidence;
  step.target_s = target_s;
  step.rows = call.rows;
  step.draft_calls = proposal.calls + calls;
  step.draft_s = step.draft_calls ? draft_s : 0.0;
  step.extend_calls = proposal.extend_calls;
  step.extend_s = proposal.extend_s;
  // A tree's first branch is a chain step the dispatcher learns chains from.
  if (!choice.lookup && dynamic_cast<const ChainShape*>(&shape) == nullptr) {
    std::tie(step.main_height, step.main_accepted) = tree.first_branch(verdict.nodes);
  }
  return step;
}

}  // namespace etspec
