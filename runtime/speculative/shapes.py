"""Tree shapes: how a proposal grows, independent of which draft model grows it.

A shape (chain, static tree, EAGLE-2 dynamic tree) is an algorithm over an ``Expander``: the
draft model seen as "the distribution of the root's children" plus "feed these nodes, get
the distributions of their children", batched per tree level. Draft runners that hold a
model implement ``Expander``; the shape decides which nodes to feed and which to keep, so
one draft runner serves every shape and one shape serves every draft model.

A ``TreePolicy`` picks the shape of every step: a fixed shape always picks itself, the
dispatcher (``dispatcher.Dispatcher``) picks from measured costs and acceptance.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from etspec.contract import NO_DRAFT_SHAPE, message
from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler, TokenDist, greedy_id
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.step import Offer, Proposal, ShapeCost, StepCosts, StepOutcome


class Expander(Protocol):
    """One proposal's view of a draft model. Node handle 0 is the root; every call to
    ``expand`` numbers the nodes it feeds next (1, 2, ... in feeding order)."""

    #: Draft vocabulary id -> target vocabulary id, [Vd] long.
    target_ids: torch.Tensor
    #: The same map for one id at a time (a list: no tensor op per drafted token).
    target_id_of: Sequence[int]
    #: Target vocabulary size (the verifier's distributions are over it).
    vocab_size: int
    #: Model calls made so far.
    calls: int
    #: The committed length: the root's index in the sequence (a node at depth d is the
    #: token at index ``position + d``).
    position: int

    def root(self) -> torch.Tensor:
        """Logits [Vd] of the root's children."""
        ...

    def expand(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        """Feed nodes (target-vocabulary ``tokens``, children of handles ``parents``);
        returns the logits [n, Vd] of each fed node's children."""
        ...


@dataclass(frozen=True)
class Choice:
    """What one step runs: the model drafter's ``shape`` or, with ``lookup`` > 0, the first
    ``lookup`` tokens of the drafter's offer instead (``shape`` then drafts nothing)."""

    shape: TreeShape
    lookup: int = 0

    @property
    def decodes(self) -> bool:
        """Nothing is proposed: the step is one target decode."""
        return not self.lookup and not self.shape.cost.max_nodes


class TreePolicy(ABC):
    """Chooses what each speculative step runs."""

    @abstractmethod
    def candidates(self) -> list[TreeShape]:
        """Every shape this policy may choose (checked against the artifacts up front)."""

    @abstractmethod
    def choose(self, offer: Offer | None = None, height: int = 1 << 30) -> Choice:
        """What the next step runs, at most ``height`` levels deep, given the drafter's
        offer (``takes_offers``)."""

    @property
    def takes_offers(self) -> bool:
        """Whether ``choose`` weighs the drafter's offers (the generator asks for them)."""
        return False

    def begin(self) -> None:  # noqa: B027
        """A request starts (the dispatcher weighs what earlier ones taught less)."""

    def observe(self, choice: Choice, step: StepOutcome) -> None:  # noqa: B027
        """Feedback after a step that ran ``choice``."""

    def shadow(self, offer: Offer, emitted: Sequence[int]) -> None:  # noqa: B027
        """After a step that did not verify ``offer``: the tokens it ``emitted``, which say
        what the offer would have accepted."""

    def needs_costs(self) -> bool:
        """Whether the generator should measure the step costs (``costs.measure_costs``)
        and hand them over (``use_costs``) before the next step (a fixed shape never
        needs them)."""
        return False

    def use_costs(self, costs: StepCosts) -> None:  # noqa: B027
        """The cost probe's measurement of each method a step runs, on this machine."""

    def report(self) -> dict[str, dict[str, float]] | None:
        """What the policy measured per candidate (``--tree auto``); None for a fixed one."""
        return None


class TreeShape(TreePolicy):
    """A fixed shape; as a policy it always picks itself."""

    name: str

    @property
    @abstractmethod
    def cost(self) -> ShapeCost: ...

    @abstractmethod
    def grow(self, expander: Expander, max_height: int, sampler: Sampler) -> Proposal:
        """The proposal of one step, at most ``max_height`` levels deep."""

    def candidates(self) -> list[TreeShape]:
        return [self]

    def choose(self, offer: Offer | None = None, height: int = 1 << 30) -> Choice:
        return Choice(self)

    def settings(self) -> TreeSettings | None:
        """The ``--tree`` settings that make this shape (what the C++ runner is passed);
        None: no settings do (the step that drafts nothing)."""
        return None

    def __str__(self) -> str:
        return self.name


def top(scores: torch.Tensor, n: int) -> torch.Tensor:
    """Indices of the ``n`` largest scores; ties keep index order (stable, deterministic)."""
    return torch.sort(scores, descending=True, stable=True).indices[:n]


@functools.cache
def chain_cost(length: int) -> ShapeCost:
    """What a chain of ``length`` draft tokens costs (0: a step that drafts nothing); one
    frozen record per length (the dispatcher asks for each length at every step)."""
    return ShapeCost(length, length, max(length - 1, 0), max(length - 1, 0))


class ChainShape(TreeShape):
    """``length`` draft tokens in a line: the top-1 token of each level when greedy, a
    sample of the draft's (processed) distribution when sampling."""

    def __init__(self, length: int) -> None:
        if length < 1:
            raise EtspecError(message("chain_length", value=length))
        self.length = length
        self.name = f"chain{length}"

    @property
    def cost(self) -> ShapeCost:
        return chain_cost(self.length)

    def settings(self) -> TreeSettings | None:
        return TreeSettings("chain", num_spec_tokens=self.length)

    def grow(self, expander: Expander, max_height: int, sampler: Sampler) -> Proposal:
        n = min(self.length, max_height)
        tokens: list[int] = []
        probs: list[TokenDist] = []
        logits = expander.root()
        for i in range(n):
            if i:  # [1, Vd]: argmax and reshape read it as the row it is
                logits = expander.expand([i - 1], [tokens[-1]])
            if sampler.greedy:
                tokens.append(expander.target_id_of[greedy_id(logits)])
                continue
            # The verifier compares q with the target's p: draft ids renamed to target ids.
            q = sampler.dist(logits).mapped(expander.target_ids.numpy())
            tokens.append(sampler.draw(q, expander.position + i + 1))
            probs.append(q)
        # A coupled verifier needs no q: it races the target's own distribution.
        return Proposal.chain(tokens, None if sampler.coupled else probs or None, expander.calls)


class NoDraftShape(ChainShape):
    """A chain of nothing: the step decodes one token with the target alone (``--tree
    auto``'s way not to speculate where speculating does not pay). A chain, so it shares the
    chains' per-step overhead and emits exactly one token per step."""

    def __init__(self) -> None:
        self.length = 0
        self.name = NO_DRAFT_SHAPE

    def settings(self) -> TreeSettings | None:
        return None

    def grow(self, expander: Expander, max_height: int, sampler: Sampler) -> Proposal:
        return Proposal([], [])
