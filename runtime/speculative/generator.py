"""SpeculativeTokenGenerator: draft -> tensorize -> verify -> accept -> commit -> emit."""

from __future__ import annotations

import time
from typing import Any

import torch

from etspec.contract import (
    DEFAULT_KV_STRATEGY,
    LOOKUP_LABEL,
    TARGET_DECODE,
    TargetMetadata,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.generator import GenerationContext, TokenSink
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler, check_replayable
from etspec.runtime.speculative.costs import measure_costs
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.kv_cache import SpecKVCacheManager, check_kv_strategy
from etspec.runtime.speculative.shapes import (
    ChainShape,
    Choice,
    NoDraftShape,
    TreePolicy,
    TreeShape,
)
from etspec.runtime.speculative.step import Acceptance, Offer, Proposal, StepOutcome
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
        check_kv_strategy(target, kv_strategy)  # now, not at the first generate
        draft.check_target(target)
        for shape in policy.candidates():
            check_shape_fits(shape, target)
            draft.check_shape(shape)
            check_exact(shape, target, draft.branching)
        self.draft = draft
        self.target = target
        self.policy = policy
        self.kv_strategy = kv_strategy
        self.verifier = verifier or Verifier()
        self.needs_hidden = draft.hidden_spec is not None

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

    def generate(self, ctx: GenerationContext, sink: TokenSink) -> int:
        stats, draft, policy = ctx.stats, self.draft, self.policy
        with stats.stage("draft"):
            stats.draft_calls += draft.prefill(
                ctx.prompt, ctx.first_token, ctx.prefill.hidden if self.needs_hidden else None
            )
        kv = SpecKVCacheManager(ctx.target, self.kv_strategy, len(ctx.prompt))
        widest = self.target.verify_width
        policy.begin()
        root = ctx.first_token
        while sink.remaining > 0:
            if policy.needs_costs():
                # The cost probe, before the runner's first step (the dispatcher follows
                # the steps' own timings from then on).
                policy.use_costs(measure_costs(ctx.target, draft, None, kv.committed))
            # Never draft past the budget: a step emits its accepted path + one token.
            height = sink.remaining - 1
            offer = None
            if height > 0 and policy.takes_offers:
                offer = draft.offer(min(height, widest - 1))
            choice = policy.choose(offer, height) if height > 0 else _DECODE
            if choice.decodes:
                outcome = self._decode(ctx, sink, kv, root)
            else:
                outcome = self._speculate(ctx, sink, kv, root, choice, offer, height)
            if outcome is None:
                break
            root, step = outcome
            policy.observe(choice, step)
            if offer is not None and not choice.lookup:
                policy.shadow(offer, sink.history[-step.emitted :])
        return kv.committed

    def _decode(
        self, ctx: GenerationContext, sink: TokenSink, kv: SpecKVCacheManager, root: int
    ) -> tuple[int, StepOutcome] | None:
        """A step that proposes nothing: one target decode, as target-only decoding runs
        it, and the draft only told what was committed (a model draft queues it and catches
        up in one call when it next proposes)."""
        stats, draft = ctx.stats, self.draft
        t0 = time.perf_counter()
        position = kv.committed
        inputs = kv.decode_inputs(torch.tensor([root]))
        t1 = time.perf_counter()
        logits, hidden = ctx.target.run(TARGET_DECODE, *inputs)
        t2 = time.perf_counter()
        target_s = t2 - t0
        # The stages timed inline (a context manager each cost more host time than the
        # rest of this bookkeeping, on every step of a draft that never pays).
        stats.stage_s["decode"] += t2 - t1
        stats.decode_calls += 1
        stats.record_decode()
        token = ctx.sampler.pick(logits, sink.history)
        kv.commit([0])
        rows = None
        if self.needs_hidden:
            rows = hidden[:1]
            ctx.target.held.keep_hidden(position, rows, self.target.max_context)
        if not sink.emit([token], logits):
            return None
        t3 = time.perf_counter()
        stats.draft_calls += draft.accept(Acceptance(position, [root], [0], token, rows))
        seconds = time.perf_counter()
        stats.stage_s["draft"] += seconds - t3
        seconds -= t0
        return token, StepOutcome(0, 0, seconds, target_s=target_s, rows=1)

    def _speculate(
        self,
        ctx: GenerationContext,
        sink: TokenSink,
        kv: SpecKVCacheManager,
        root: int,
        choice: Choice,
        offer: Offer | None,
        height: int,
    ) -> tuple[int, StepOutcome] | None:
        """A step that verifies a proposal: the offer's first ``choice.lookup`` tokens, or
        the model's ``choice.shape``."""
        stats, sampler, draft = ctx.stats, ctx.sampler, self.draft
        vocab = self.target.vocab_size
        t0 = time.perf_counter()
        shape = choice.shape
        with stats.stage("draft"):
            if choice.lookup:
                assert offer is not None
                proposal = Proposal.chain(offer.tokens[: choice.lookup])
            else:
                proposal = draft.propose(shape, height, sampler)
        draft_s = time.perf_counter() - t0
        stats.draft_calls += proposal.calls
        with stats.stage("tensorize"):
            tree = DraftTree.build(root, proposal.tokens, proposal.parents)
            if ctx.target.reference:
                tree.check(vocab)
            method, inputs = kv.verify_inputs(tree)
        position = kv.committed
        t1 = time.perf_counter()
        with stats.stage("verify"):
            logits, hidden = ctx.target.run(method, *inputs)
        target_s = time.perf_counter() - t1
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
        rows = None
        if self.needs_hidden:
            rows = _rows(hidden, verdict.nodes)
            ctx.target.held.keep_hidden(position, rows, self.target.max_context)
        label = LOOKUP_LABEL if choice.lookup else shape.name
        stats.record_verify(tree.size, verdict.accepted, tree.max_depth, label)
        nodes = verdict.nodes
        path_tokens = [root, *(proposal.tokens[i - 1] for i in nodes[1:])]
        emitted = [*path_tokens[1:], verdict.next_token]
        # Row nodes[i] holds the target distribution emitted[i] was chosen from.
        if not sink.emit(emitted, _rows(logits, nodes)):
            return None
        t2 = time.perf_counter()
        with stats.stage("draft"):
            calls = draft.accept(
                Acceptance(
                    position=position,
                    tokens=path_tokens,
                    nodes=verdict.nodes,
                    next_token=verdict.next_token,
                    hidden=rows,
                )
            )
        stats.draft_calls += calls
        now = time.perf_counter()
        if calls:
            draft_s += now - t2
        allowed = choice.lookup or min(shape.cost.max_height, height)
        # A tree's first branch is a chain step the dispatcher learns chains from.
        chain = choice.lookup or isinstance(shape, ChainShape)
        main = (0, 0) if chain else tree.first_branch(nodes)
        return verdict.next_token, StepOutcome(
            tree.max_depth,
            verdict.accepted,
            now - t0,
            allowed,
            evidence=offer.evidence if choice.lookup and offer is not None else None,
            target_s=target_s,
            rows=self.target.verify_width_for(tree.capacity + 1),
            draft_s=draft_s if proposal.calls or calls else 0.0,
            draft_calls=proposal.calls + calls,
            extend_s=proposal.extend_s,
            extend_calls=proposal.extend_calls,
            main_height=main[0],
            main_accepted=main[1],
        )


_DECODE = Choice(NoDraftShape())


def _rows(t: torch.Tensor, nodes: list[int]) -> torch.Tensor:
    """``t[nodes]``; a slice (no gather, no index tensor) when the path is rows 0..n-1, as
    for every chain and every first-branch tree path."""
    if nodes[-1] == len(nodes) - 1:  # rows increase along a path, so this means 0..n-1
        return t[: len(nodes)]
    return t.index_select(0, torch.tensor(nodes))


def check_exact(shape: TreeShape, target: TargetMetadata, branching: bool) -> None:
    """Refuse a tree that a drafter would branch on a target whose recipe quantizes
    activations per row (``contract.ROW_QUANTIZED_DTYPES``): its rows would not reproduce
    the decode's tokens."""
    if branching and target.row_quantized and not isinstance(shape, ChainShape):
        raise EtspecError(message("inexact_tree", name=shape.name, dtype=target.dtype))


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
