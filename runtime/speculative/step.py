"""The records of one speculative step, shared by draft runners, tree shapes and the cost
model: what a drafter proposes (``Proposal``) and learns (``Acceptance``), what a shape asks
of the programs (``ShapeCost``), what a step did (``StepOutcome``) and what its calls cost
(``DraftCosts``, ``StepCosts``, timed with a ``CostProbe``). It imports none of the modules
that use it, so they import one another in one direction only.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch

from etspec.contract import (
    AUTO_SEEDED_DRAFT_CALL,
    AUTO_SEEDED_VERIFY_BASE,
    AUTO_SEEDED_VERIFY_PER_ROW,
    MASK_MIN,
)
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.sampling import TokenDist


@dataclass(frozen=True)
class DraftCosts:
    """Seconds of one draft call per tree level (``step_s``, ``step_width`` rows each) and
    of the per-step call that starts a proposal (``extend_s``); zero for a drafter that
    calls no model."""

    step_width: int = 1
    step_s: float = 0.0
    extend_s: float = 0.0


@dataclass(frozen=True)
class Proposal:
    """Draft nodes ``1..M`` as a tree over the root (the last emitted token, node 0).

    ``parents[i-1]`` is node i's parent, in ``[0, i)``; a chain has ``parents = [0, 1, ...]``.
    ``probs[i-1]`` is the distribution (target ids) node i was drawn from, for sampling
    verification; ``None`` means every node was a deterministic pick (a point mass: the
    verifier accepts token x with probability p(x) and removes it from p on rejection).
    ``calls`` counts draft model calls made. ``label`` names what proposed the nodes when it
    was not the step's shape (a combined drafter's prompt lookup): the step then says nothing
    about the shape, and its statistics go under the label. ``evidence`` says how a chain
    was found when the drafter can tell (prompt lookup: ``"ngram3"``), so ``--tree auto`` can
    judge each kind of proposal on its own acceptance and cut the ones that do not pay.
    """

    tokens: list[int]
    parents: list[int]
    probs: list[TokenDist] | None = None
    calls: int = 0
    label: str | None = None
    evidence: str | None = None

    @classmethod
    def chain(  # type: ignore[no-untyped-def]
        cls,
        tokens: list[int],
        probs: list[TokenDist] | None = None,
        calls: int = 0,
        label: str | None = None,
        evidence: str | None = None,
    ):
        return cls(tokens, list(range(len(tokens))), probs, calls, label, evidence)

    def prefix(self, n: int) -> Proposal:
        """The first ``n`` nodes of a chain (its first ``n`` levels)."""
        assert self.parents[:n] == list(range(n)), "only a chain is cut by depth"
        probs = self.probs[:n] if self.probs is not None else None
        return Proposal.chain(self.tokens[:n], probs, self.calls, self.label, self.evidence)


@dataclass(frozen=True)
class Acceptance:
    """What one verify committed, as the draft must learn it.

    ``tokens`` were written to the target's KV at positions ``position, position + 1, ...``:
    the root followed by the accepted draft tokens. ``nodes`` are their rows in the verified
    tree (root first). ``next_token`` is the correction or bonus token, emitted but not yet
    in the target's KV. ``hidden`` holds the target states of ``tokens`` when requested.
    """

    position: int
    tokens: list[int]
    nodes: list[int]
    next_token: int
    hidden: torch.Tensor | None


@dataclass(frozen=True)
class ShapeCost:
    """What a shape asks of the programs per step, for budget checks and cost models."""

    max_nodes: int  # draft nodes verified (the verify width needed is this + 1)
    max_height: int  # deepest node: most draft tokens one step can accept
    fed_nodes: int  # nodes fed to the draft model (draft scratch slots needed)
    levels: int  # draft expansion levels (calls, when a level fits one step width)


@dataclass(frozen=True)
class StepOutcome:
    """What one speculative step did, as a tree policy learns it."""

    height: int  # depth of the deepest drafted node (0: nothing was drafted)
    accepted: int  # draft tokens accepted (the step emitted one more)
    seconds: float  # wall time of the step: draft, verify, accept, commit
    # How deep the step could have drafted (its shape, capped by the token budget); a
    # drafter that offered less (prompt lookup's match ran out) ended the chain itself.
    # None: ``height``.
    allowed: int | None = None
    # False when the draft runner proposed something other than the shape asked for
    # (``Proposal.label``): the step then teaches a tree policy nothing about the shape.
    follows_shape: bool = True
    evidence: str | None = None  # ``Proposal.evidence``

    @property
    def emitted(self) -> int:
        return self.accepted + 1


@dataclass
class StepCosts:
    """Measured seconds per call of the methods one speculative step runs."""

    verify_s: dict[int, float]  # per compiled verify width
    draft_step_s: float = 0.0
    draft_extend_s: float = 0.0
    step_width: int = 1
    decode_s: float = 0.0  # one target_decode (a step that drafts nothing)

    def predict(self, cost: ShapeCost, widths: tuple[int, ...]) -> float:
        """Seconds of one step of a shape that costs ``cost`` (``TreeShape.cost``)."""
        if cost.max_nodes == 0:  # nothing to verify: a decode (the draft still follows)
            # Untimed (no position to probe at), a decode costs at most the narrowest verify.
            decode = self.decode_s or self.verify_s[min(widths)]
            return decode + self.draft_extend_s
        width = next(w for w in widths if w >= cost.max_nodes + 1)
        calls = max(cost.levels, math.ceil(cost.fed_nodes / max(self.step_width, 1)))
        return self.verify_s[width] + calls * self.draft_step_s + self.draft_extend_s


def fixed_costs(widths: tuple[int, ...]) -> StepCosts:
    """The timing-free costs of a seeded sampling request under ``--tree auto``
    (``contract.AUTO_SEEDED_*``): every level one draft call, whatever the step width."""
    return StepCosts(
        {w: AUTO_SEEDED_VERIFY_BASE + AUTO_SEEDED_VERIFY_PER_ROW * w for w in widths},
        AUTO_SEEDED_DRAFT_CALL,
        AUTO_SEEDED_DRAFT_CALL,
        step_width=max(widths),
        decode_s=AUTO_SEEDED_VERIFY_BASE + AUTO_SEEDED_VERIFY_PER_ROW,
    )


@dataclass(frozen=True)
class CostProbe:
    """Times program calls on scratch slots only (nothing committed is touched), with masks
    as wide as a ``context``-token context needs (a call's cost grows with the context)."""

    repeats: int = 5
    context: int = 256

    def timed(self, program: Program, method: str, *inputs: torch.Tensor) -> float:
        """Median wall time of ``method`` after one warm-up call."""
        program.run(method, *inputs)  # warm-up
        times = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            program.run(method, *inputs)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def scratch_inputs(self, width: int, layout: MaskLayout) -> tuple[torch.Tensor, ...]:
        """(tokens, positions, slots, mask, *band) of ``width`` rows in scratch slots."""
        rows = torch.arange(width)
        slots = layout.max_context + rows
        columns = layout.width(min(self.context, layout.max_context))
        mask = torch.full((width, columns), MASK_MIN)
        mask[rows, layout.column_of(slots, columns)] = 0.0
        return rows % 2, rows, slots, mask, *layout.band(0, columns)

    def decode_inputs(self, position: int, layout: MaskLayout) -> tuple[torch.Tensor, ...]:
        """(token, position, mask, *band) of a decode at ``position``, the next slot to be
        committed (so nothing committed is touched: the next step writes it again), with a
        mask as wide as the scratch probes' but showing only its own slot."""
        columns = layout.width(max(position + 1, min(self.context, layout.max_context)))
        mask = torch.full((1, columns), MASK_MIN)
        mask[0, position] = 0.0
        return torch.tensor([1]), torch.tensor([position]), mask, *layout.band(position, columns)
