"""SpeculativeTokenGenerator: draft -> tensorize -> verify -> accept -> commit -> emit."""

from __future__ import annotations

import time
from typing import Any

import torch

from etspec.contract import DEFAULT_KV_STRATEGY, TargetMetadata, message
from etspec.errors import EtspecError
from etspec.runtime.generator import GenerationContext, TokenSink
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler, check_replayable
from etspec.runtime.speculative.costs import measure_costs
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.kv_cache import SpecKVCacheManager, check_kv_strategy
from etspec.runtime.speculative.shapes import ChainShape, TreePolicy, TreeShape
from etspec.runtime.speculative.step import Acceptance, Proposal, StepOutcome
from etspec.runtime.speculative.tree import DraftTree
from etspec.runtime.speculative.verifier import Verifier


class SpeculativeTokenGenerator:
    """Lossless speculative decoding over any ``SpeculativeDraftRunner``.

    Each step the tree policy picks a shape, the draft grows a proposal of that shape, and
    one ``target_verify`` call (the narrowest compiled width that holds it) checks the root
    (the last emitted token) and every draft node. The step emits the accepted path and one
    more token from the target, so every step emits at least one token.
    """

    def __init__(
        self,
        draft: SpeculativeDraftRunner,
        target: TargetMetadata,
        tree: TreePolicy | int = 3,
        kv_strategy: str = DEFAULT_KV_STRATEGY,
        verifier: Verifier | None = None,
    ) -> None:
        policy = ChainShape(tree) if isinstance(tree, int) else tree
        if draft.hidden_spec is not None and draft.hidden_spec != target.hidden_spec():
            raise EtspecError(
                f"the draft needs target hidden states {draft.hidden_spec}, the target "
                f"exports {target.hidden_spec()}; re-export the target to match"
            )
        draft.check_target(target)
        for shape in policy.candidates():
            check_shape_fits(shape, target)
            draft.check_shape(shape)
        self.draft = draft
        self.target = target
        self.policy = policy
        self.kv_strategy = kv_strategy
        self.verifier = verifier or Verifier()
        check_kv_strategy(target, kv_strategy)  # now, not at the first generate

    def check(self, sampler: Sampler) -> None:
        check_replayable(sampler.processors)

    def reset(self) -> None:
        self.draft.reset()

    def memory(self) -> dict[str, int]:
        return self.draft.memory()

    def programs(self) -> tuple[Program, ...]:
        return self.draft.programs()

    def describe(self) -> dict[str, Any]:
        return {
            "generator": type(self).__name__,
            "draft": type(self.draft).__name__,
            "tree": [c.name for c in self.policy.candidates()],
            "kv_strategy": self.kv_strategy,
            "policy_report": self.policy.report(),
        }

    def generate(self, ctx: GenerationContext, sink: TokenSink) -> None:
        stats, sampler, draft = ctx.stats, ctx.sampler, self.draft
        policy = self.policy.for_request(sampler)
        needs_hidden = draft.hidden_spec is not None
        with stats.stage("draft"):
            stats.draft_calls += draft.prefill(
                ctx.prompt, ctx.first_token, ctx.prefill.hidden if needs_hidden else None
            )
        kv = SpecKVCacheManager(ctx.target, self.kv_strategy, len(ctx.prompt))
        vocab = self.target.vocab_size
        root = ctx.first_token
        while sink.remaining > 0:
            if policy.needs_costs():
                # --tree auto's cost model: before the first step, and again (warm) at the
                # step that reaches AUTO_REMEASURE_AFTER, within the request that got there,
                # not at the start of the next one, which may be a short one it would slow.
                policy.use_costs(measure_costs(ctx.target, draft, position=kv.committed))
            shape = policy.choose()
            t0 = time.perf_counter()
            # Never draft past the budget: a step emits its accepted path + one token.
            height = sink.remaining - 1
            with stats.stage("draft"):
                proposal = draft.propose(shape, height, sampler) if height > 0 else _NOTHING
            stats.draft_calls += proposal.calls
            allowed = min(shape.cost.max_height, height)
            if proposal.evidence is not None and proposal.label is None:
                keep = policy.trim(shape, len(proposal.tokens), proposal.evidence)
                if keep < len(proposal.tokens):
                    proposal, allowed = proposal.prefix(keep), keep
            with stats.stage("tensorize"):
                tree = DraftTree.build(root, proposal.tokens, proposal.parents)
                if ctx.target.reference:
                    tree.check(vocab)
                method, inputs = kv.verify_inputs(tree)
            position = kv.committed
            with stats.stage("verify"):
                logits, hidden = ctx.target.run(method, *inputs)
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
            stats.record_verify(
                tree.size, verdict.accepted, tree.max_depth, proposal.label or shape.name
            )
            nodes = verdict.nodes
            path_tokens = [root, *(proposal.tokens[i - 1] for i in nodes[1:])]
            emitted = [*path_tokens[1:], verdict.next_token]
            # Row nodes[i] holds the target distribution emitted[i] was chosen from.
            if not sink.emit(emitted, _rows(logits, nodes)):
                return
            with stats.stage("draft"):
                stats.draft_calls += draft.accept(
                    Acceptance(
                        position=position,
                        tokens=path_tokens,
                        nodes=verdict.nodes,
                        next_token=verdict.next_token,
                        hidden=_rows(hidden, nodes) if needs_hidden else None,
                    )
                )
            outcome = StepOutcome(
                tree.max_depth,
                verdict.accepted,
                time.perf_counter() - t0,
                allowed,
                follows_shape=proposal.label is None,
                evidence=proposal.evidence,
            )
            policy.observe(shape, outcome)
            draft.observe(outcome)
            root = verdict.next_token


_NOTHING = Proposal([], [])


def _rows(t: torch.Tensor, nodes: list[int]) -> torch.Tensor:
    """``t[nodes]``; a slice (no gather, no index tensor) when the path is rows 0..n-1, as
    for every chain and every first-branch tree path."""
    if nodes[-1] == len(nodes) - 1:  # rows increase along a path, so this means 0..n-1
        return t[: len(nodes)]
    return t.index_select(0, torch.tensor(nodes))


def check_shape_fits(shape: TreeShape, target: TargetMetadata) -> None:
    """Refuse a shape whose trees cannot be verified by this target in one call."""
    need = shape.cost.max_nodes + 1
    if need > target.verify_width:
        raise EtspecError(
            message(
                "tree_too_wide",
                name=shape.name,
                nodes=shape.cost.max_nodes,
                need=need,
                width=target.verify_width,
            )
        )
