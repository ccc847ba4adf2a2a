"""Verification: which draft tokens the target accepts, and the token it emits after them.

Greedy: walk from the root; at each node take the child whose token equals the target's
argmax there; the first miss emits the argmax (correction), a full path emits the argmax
after the last accepted node (bonus). Every emitted token is the target's greedy token.

Coupled sampling (a seeded request, ``Sampler.coupled``): as greedy, with the target's
token at each node the one its distribution's race gives at that node's sequence index
(``TokenDist.race``). Every emitted token is the one target-only decoding with the same seed
emits there, whatever was proposed; a draft that races its own distribution with the same
clocks agrees with it as often as the race couples the two.

Sampling (multi-round speculative sampling, lossless): at a node with target distribution
p, try its children x in order, each proposed from its q; accept x with probability
min(1, p(x)/q(x)); on rejection p <- normalize(max(p - q, 0)) and try the next child; when
none is accepted, sample from p. A chain has one child per node, which is the classic
speculative sampling of Leviathan et al. and Chen et al. Tree children are the draft's
top-k picks, deterministic, so their q is a point mass: x is accepted with probability
p(x) and removed from p on rejection, which keeps siblings (distinct tokens) exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from etspec.runtime.sampling import Sampler, TokenDist, greedy_ids
from etspec.runtime.speculative.tree import DraftTree


@dataclass(frozen=True)
class Verdict:
    nodes: list[int]  # accepted rows, root first
    next_token: int  # correction or bonus token
    row: int  # the tree row whose target distribution produced ``next_token``

    @property
    def accepted(self) -> int:
        return len(self.nodes) - 1


class Verifier:
    """Greedy or sampling acceptance over a verified draft tree."""

    def verify(
        self,
        tree: DraftTree,
        logits: torch.Tensor,
        sampler: Sampler,
        draft_probs: Sequence[TokenDist] | None,
        history: Sequence[int] = (),
    ) -> Verdict:
        """``logits[i]`` is the target's next-token logits after tree row i; ``history``
        is the sequence through the root."""
        logits = sampler.process(logits, history)
        if sampler.greedy:
            return self._greedy(tree, logits)
        if sampler.coupled:
            return self._coupled(tree, logits, sampler, len(history))
        return self._sample(tree, logits, draft_probs, sampler)

    def _coupled(
        self, tree: DraftTree, logits: torch.Tensor, sampler: Sampler, index: int
    ) -> Verdict:
        """The greedy walk over raced tokens; ``index`` is the sequence index of the root's
        children."""
        tokens = tree.token_list
        children = tree.children
        node, nodes = 0, [0]
        while True:
            best = sampler.draw(sampler.dist(logits[node]), index + len(nodes) - 1)
            nxt = next((c for c in children[node] if tokens[c] == best), None)
            if nxt is None:
                return Verdict(nodes, best, node)
            node = nxt
            nodes.append(node)

    def _greedy(self, tree: DraftTree, logits: torch.Tensor) -> Verdict:
        best = greedy_ids(logits)  # the only host sync of a greedy step
        tokens = tree.token_list
        children = tree.children
        node, nodes = 0, [0]
        while True:
            nxt = next((c for c in children[node] if tokens[c] == best[node]), None)
            if nxt is None:
                return Verdict(nodes, best[node], node)
            node = nxt
            nodes.append(node)

    def _sample(
        self,
        tree: DraftTree,
        logits: torch.Tensor,
        draft_probs: Sequence[TokenDist] | None,
        sampler: Sampler,
    ) -> Verdict:
        # Only the rows on the walked path are turned into distributions (``Sampler.dist``:
        # a few passes over the row, then work on the few tokens it keeps).
        tokens = tree.token_list
        children = tree.children
        node, nodes = 0, [0]
        while True:
            p = sampler.dist(logits[node])
            accepted = None
            for c in children[node]:
                x = tokens[c]
                q = None if draft_probs is None else draft_probs[c - 1]
                px = p.prob(x)
                qx = 1.0 if q is None else q.prob(x)  # None: a deterministic pick
                if qx > 0 and sampler.uniform() < min(1.0, px / qx):
                    accepted = c
                    break
                p = self.residual(p, q, x)
            if accepted is None:
                return Verdict(nodes, p.draw(sampler.uniform()), node)
            node = accepted
            nodes.append(node)

    def residual(self, p: TokenDist, q: TokenDist | None, x: int) -> TokenDist:
        """The distribution to sample after rejecting ``x`` drawn from ``q`` (None: a point
        mass on ``x``): normalize(max(p - q, 0))."""
        r = p.without(x) if q is None else p.minus(q)
        # Nothing left means p == q (the draft was exact, so rejection had probability 0).
        return p if r is None else r
