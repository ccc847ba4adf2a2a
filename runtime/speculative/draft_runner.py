"""The method-neutral draft seam: anything that can propose tokens for the target to verify.

The speculative loop only ever talks to a ``SpeculativeDraftRunner``: it never asks whether
proposals come from an EAGLE head, an n-gram table or an MTP head, nor where that model lives.
A runner declares the target hidden states it needs; the loop hands them over after prefill
and after every verify, for exactly the tokens that were committed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import torch

from etspec.contract import HiddenStateSpec, TargetMetadata
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.step import Acceptance, CostProbe, DraftCosts, Offer, Proposal

if TYPE_CHECKING:
    from etspec.runtime.speculative.shapes import TreeShape


class SpeculativeDraftRunner(ABC):
    """Proposes tokens; keeps its own state in step with the committed sequence."""

    #: Target hidden states this runner reads (``None``: it needs none).
    hidden_spec: HiddenStateSpec | None = None
    #: Whether proposals can branch (a model that scores alternatives); runners that cannot
    #: grow trees propose the deepest chain a shape allows.
    branching: bool = False
    #: Whether ``propose`` runs a draft model (the dispatcher weighs its shapes).
    has_model: bool = True
    #: Whether ``offer`` may give a proposal that costs no model call (prompt lookup).
    offers: bool = False

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

    def offer(self, max_tokens: int) -> Offer | None:
        """A chain of at most ``max_tokens`` that costs no model call, and how it was found
        (prompt lookup's match); None when there is none. The dispatcher weighs it against
        the model's shapes and a plain decode."""
        return None

    def step_costs(self, probe: CostProbe) -> DraftCosts:
        """Its calls' wall times, timed by ``probe`` (the dispatcher's cost model)."""
        return DraftCosts()
