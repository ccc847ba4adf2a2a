"""The records of one speculative step, shared by draft runners, tree shapes and the cost
model: what a drafter proposes (``Proposal``) and learns (``Acceptance``), what a shape asks
of the programs (``ShapeCost``), what a step did (``StepOutcome``) and what its calls cost
(``DraftCosts``, ``StepCosts``, timed with a ``CostProbe``). It imports none of the modules
that use it, so they import one another in one direction only.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import torch

from etspec.contract import MASK_MIN, STEP_CHAIN, STEP_DECODE, STEP_TREE
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
    ``calls`` counts draft model calls made, ``extend_calls`` of them the catch-up that
    started the proposal (fed what the target committed since the last one), which took
    ``extend_s`` seconds: the cost model prices it apart from the levels.
    """

    tokens: list[int]
    parents: list[int]
    probs: list[TokenDist] | None = None
    calls: int = 0
    extend_calls: int = 0
    extend_s: float = 0.0

    @classmethod
    def chain(  # type: ignore[no-untyped-def]
        cls, tokens: list[int], probs: list[TokenDist] | None = None, calls: int = 0
    ):
        return cls(tokens, list(range(len(tokens))), probs, calls)


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
class Offer:
    """A proposal a drafter has at no model call (prompt lookup's match): the chain's tokens
    and how they were found (``"ngram3"``), which the dispatcher judges it by."""

    tokens: list[int]
    evidence: str


@dataclass(frozen=True)
class StepOutcome:
    """What one speculative step did, as a tree policy learns it."""

    height: int  # depth of the deepest drafted node (0: nothing was drafted)
    accepted: int  # draft tokens accepted (the step emitted one more)
    seconds: float  # wall time of the step: draft, verify (or decode), accept, commit
    # How deep the step could have drafted (its shape, capped by the token budget); a
    # drafter that offered less ended the chain itself. None: ``height``.
    allowed: int | None = None
    evidence: str | None = None  # the offer's, when the step verified it
    # What the step's calls took: the verify's (or the decode's) seconds and rows (1: a
    # decode), and the draft's seconds over its model calls.
    target_s: float = 0.0
    rows: int = 0
    draft_s: float = 0.0
    draft_calls: int = 0
    # A tree's first branch (from the root, each node's first child: the chain of the
    # draft's top-ranked tokens, which a chain step of that length would have drafted): how
    # deep it went and how many of its tokens the step accepted. 0 for a chain or a lookup.
    main_height: int = 0
    main_accepted: int = 0
    # Of the draft's seconds and calls, the catch-up's (``Proposal.extend_s``).
    extend_s: float = 0.0
    extend_calls: int = 0

    @property
    def emitted(self) -> int:
        return self.accepted + 1


@dataclass
class StepCosts:
    """Seconds per call of the methods a step runs (measured by the cost probe, or a
    ``costs.CostModel``'s estimates now) and of the host work beside them per kind of step
    (``step_kind``)."""

    verify_s: dict[int, float]  # per compiled verify width
    draft_s: float = 0.0  # one draft level call of a chain (a link)
    step_width: int = 1  # draft rows one call feeds
    decode_s: float = 0.0  # one target_decode (a step that drafts nothing)
    # Per step kind, and per kind and verify width (``host_key``).
    overhead_s: dict[str, float] = field(default_factory=dict)
    # The catch-up that starts a proposal (0: a level call's), and one level call of a tree
    # (0: a chain's): in Python a tree level gathers its parents' states and masks, several
    # times a chain link's host work, and an extend feeds several rows (measured on the
    # bundled pair: extend 0.7 ms, chain link 0.3-0.5, tree level 0.9-1.2). Priced as one,
    # each chain link cost what the mix did, and `auto` ran chains too short.
    extend_s: float = 0.0
    tree_level_s: float = 0.0

    def predict(self, cost: ShapeCost, widths: tuple[int, ...], model: bool = True) -> float:
        """Seconds of one step of a shape that costs ``cost`` (``TreeShape.cost``); ``model``
        False: its nodes cost no draft call (a lookup's chain)."""
        kind = step_kind(cost)
        if cost.max_nodes == 0:
            return self.decode_s + self.overhead_s.get(kind, 0.0)
        width = _narrowest(widths, cost.max_nodes + 1)
        # The kind's host work at this width, else (not yet priced) the kind's.
        host = self.overhead_s.get(host_key(kind, width))
        seconds = self.verify_s[width] + (self.overhead_s.get(kind, 0.0) if host is None else host)
        if model:  # the extend that catches the draft up, then its levels
            levels = max(cost.levels, math.ceil(cost.fed_nodes / max(self.step_width, 1)))
            level = (kind == STEP_TREE and self.tree_level_s) or self.draft_s
            seconds += (self.extend_s or self.draft_s) + levels * level
        return seconds


@functools.cache
def _narrowest(widths: tuple[int, ...], rows: int) -> int:
    return next(w for w in widths if w >= rows)


def host_key(kind: str, width: int) -> str:
    """The key of a kind of step's host work at one verify width: it grows with the rows
    a step walks (``costs.CostModel``)."""
    return f"{kind}{width}"


def step_kind(cost: ShapeCost) -> str:
    """``"decode"`` (nothing verified), ``"chain"`` (one node per level: a chain, whose
    verify leaves its rows in place) or ``"tree"`` (whose commit may move rows)."""
    if cost.max_nodes == 0:
        return STEP_DECODE
    return STEP_CHAIN if cost.max_nodes == cost.max_height else STEP_TREE


@dataclass(frozen=True)
class CostProbe:
    """Times program calls on scratch slots only (nothing committed is touched), with masks
    as wide as a ``context``-token context needs (a call's cost grows with the context)."""

    repeats: int = 5
    context: int = 256
    warm_up: bool = True  # one untimed call first (a method's first call loads it)

    def timed(self, program: Program, method: str, *inputs: torch.Tensor) -> float:
        """The least wall time of ``method`` over ``repeats`` calls: a probe runs in a
        moment, and the least is the call's cost undisturbed by it (the dispatcher then
        follows what the steps' own calls take; an optimistic first price gets a call
        tried, and its real times correct it)."""
        if self.warm_up:
            program.run(method, *inputs)
        times = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            program.run(method, *inputs)
            times.append(time.perf_counter() - t0)
        return min(times)

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
