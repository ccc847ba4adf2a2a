"""The method-neutral draft seam: anything that can propose tokens for the target to verify.

The speculative loop only ever talks to a ``SpeculativeDraftRunner``: it never asks whether
proposals come from an EAGLE head, an n-gram table or an MTP head, nor where that model lives.
A runner declares the target hidden states it needs; the loop hands them over after prefill
and after every verify, for exactly the tokens that were committed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from etspec.contract import HiddenStateSpec, TargetMetadata
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler, TokenDist

if TYPE_CHECKING:
    from etspec.runtime.speculative.costs import CostProbe
    from etspec.runtime.speculative.shapes import StepOutcome, TreeShape


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
    about the shape, and its statistics go under the label.
    """

    tokens: list[int]
    parents: list[int]
    probs: list[TokenDist] | None = None
    calls: int = 0
    label: str | None = None

    @classmethod
    def chain(  # type: ignore[no-untyped-def]
        cls,
        tokens: list[int],
        probs: list[TokenDist] | None = None,
        calls: int = 0,
        label: str | None = None,
    ):
        return cls(tokens, list(range(len(tokens))), probs, calls, label)


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


class SpeculativeDraftRunner(ABC):
    """Proposes tokens; keeps its own state in step with the committed sequence."""

    #: Target hidden states this runner reads (``None``: it needs none).
    hidden_spec: HiddenStateSpec | None = None
    #: Whether proposals can branch (a model that scores alternatives); runners that cannot
    #: grow trees propose the deepest chain a shape allows.
    branching: bool = False

    def check_target(self, target: TargetMetadata) -> None:  # noqa: B027  # optional hook
        """Reject a target this runner cannot work with (called before any generation)."""

    def check_shape(self, shape: TreeShape) -> None:  # noqa: B027  # optional hook
        """Reject a tree shape this runner cannot grow (called before any generation)."""

    @abstractmethod
    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        """Start a sequence: the prompt (in the target KV), the first generated token (not
        yet) and the prompt's target states. Returns the number of model calls made."""

    @abstractmethod
    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        """Draft nodes continuing the committed sequence, grown as ``shape`` says and at
        most ``max_height`` levels deep."""

    @abstractmethod
    def accept(self, acceptance: Acceptance) -> int:
        """Commit what the target accepted, roll back the rest; returns model calls made."""

    @abstractmethod
    def reset(self) -> None:
        """Forget the current sequence."""

    def memory(self) -> dict[str, int]:
        """Bytes the draft adds: weights and KV cache."""
        return {}

    def programs(self) -> tuple[Program, ...]:
        """The programs this runner calls (their locks are held while a runner generates)."""
        return ()

    def observe(self, step: StepOutcome) -> None:  # noqa: B027  # optional hook
        """How the step of the last proposal went (a drafter that chooses per step learns
        from it)."""

    def step_costs(self, probe: CostProbe) -> DraftCosts:
        """Its calls' wall times, timed by ``probe`` (the dispatcher's cost model)."""
        return DraftCosts()
