"""SpeculativeTokenGenerator: draft -> tensorize -> verify -> accept -> commit -> emit."""

from __future__ import annotations

from etspec.contract import TARGET_VERIFY, TargetMetadata
from etspec.errors import EtspecError
from etspec.runtime.generator import GenerationContext, TokenSink
from etspec.runtime.sampling import Sampler, check_replayable
from etspec.runtime.speculative.draft_runner import (
    Acceptance,
    Proposal,
    SpeculativeDraftRunner,
)
from etspec.runtime.speculative.kv_cache import SpecKVCacheManager, check_kv_strategy
from etspec.runtime.speculative.tree import DraftTree
from etspec.runtime.speculative.verifier import Verifier


class SpeculativeTokenGenerator:
    """Lossless speculative decoding over any ``SpeculativeDraftRunner``.

    Each step verifies the root (the last emitted token) plus up to ``num_spec_tokens``
    draft tokens in one ``target_verify`` call and emits the accepted drafts and one more
    token from the target, so every step emits at least one token.
    """

    def __init__(
        self,
        draft: SpeculativeDraftRunner,
        target: TargetMetadata,
        num_spec_tokens: int = 3,
        kv_strategy: str = "position-overwrite",
        verifier: Verifier | None = None,
    ) -> None:
        if num_spec_tokens < 1:
            raise EtspecError(f"--num-spec-tokens must be at least 1, got {num_spec_tokens}")
        if num_spec_tokens + 1 > target.verify_width:
            raise EtspecError(
                f"--num-spec-tokens {num_spec_tokens} needs a verify width of "
                f"{num_spec_tokens + 1}, the target was exported with {target.verify_width}; "
                "lower it or re-export with a larger --verify-width"
            )
        if draft.hidden_spec is not None and draft.hidden_spec != target.hidden_spec():
            raise EtspecError(
                f"the draft needs target hidden states {draft.hidden_spec}, the target "
                f"exports {target.hidden_spec()}; re-export the target to match"
            )
        draft.check_target(target)
        self.draft = draft
        self.num_spec_tokens = num_spec_tokens
        self.kv_strategy = kv_strategy
        self.verifier = verifier or Verifier()
        check_kv_strategy(target, kv_strategy)  # now, not at the first generate

    def check(self, sampler: Sampler) -> None:
        check_replayable(sampler.processors)

    def reset(self) -> None:
        self.draft.reset()

    def memory(self) -> dict[str, int]:
        return self.draft.memory()

    def generate(self, ctx: GenerationContext, sink: TokenSink) -> None:
        stats, sampler, draft = ctx.stats, ctx.sampler, self.draft
        needs_hidden = draft.hidden_spec is not None
        with stats.stage("draft"):
            stats.draft_calls += draft.prefill(
                ctx.prompt, ctx.first_token, ctx.prefill.hidden if needs_hidden else None
            )
        kv = SpecKVCacheManager(ctx.target, self.kv_strategy, len(ctx.prompt), ctx.reference)
        root = ctx.first_token
        while sink.remaining > 0:
            # Never draft past the budget: a step emits accepted drafts + one token.
            budget = min(self.num_spec_tokens, sink.remaining - 1)
            with stats.stage("draft"):
                proposal = draft.propose(budget, sampler) if budget > 0 else Proposal([], [])
            stats.draft_calls += proposal.calls
            with stats.stage("tensorize"):
                tree = DraftTree.build(root, proposal.tokens, proposal.parents)
                inputs = kv.verify_inputs(tree)
            position = kv.committed
            with stats.stage("verify"):
                logits, hidden = ctx.target.run(TARGET_VERIFY, *inputs)
            with stats.stage("accept"):
                verdict = self.verifier.verify(
                    tree,
                    logits[: tree.size + 1],
                    sampler,
                    proposal.probs,
                    sink.history,
                )
            with stats.stage("commit"):
                stats.commit_calls += kv.commit(verdict.nodes)
            stats.record_verify(tree.size, verdict.accepted)
            path_tokens = tree.tokens[verdict.nodes].tolist()
            emitted = [*path_tokens[1:], verdict.next_token]
            # Row nodes[i] holds the target distribution emitted[i] was chosen from.
            if not sink.emit(emitted, logits[verdict.nodes]):
                return
            with stats.stage("draft"):
                stats.draft_calls += draft.accept(
                    Acceptance(
                        position=position,
                        tokens=path_tokens,
                        nodes=verdict.nodes,
                        next_token=verdict.next_token,
                        hidden=hidden[verdict.nodes] if needs_hidden else None,
                    )
                )
            root = verdict.next_token
