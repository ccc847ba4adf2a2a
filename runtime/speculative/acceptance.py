"""What the dispatcher has seen of each way a step can go, as counts that decay: a tree's
tokens per step (``StepRecord``) and chain acceptance by depth (``DepthAcceptance``), with
the estimates and optimistic bounds ``dispatcher.Dispatcher`` rates the ways by (the C++
twin: ``speculative/dispatcher.cpp``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from etspec.contract import AUTO_MEAN_PRIOR_STEPS


@dataclass
class StepRecord:
    """Tokens emitted per step by one shape, over its steps; counts decay (``decay``)."""

    steps: float = 0.0
    tokens: float = 0.0
    squares: float = 0.0  # sum of squared tokens per step, for the spread
    runs: int = 0  # steps run, undecayed (for reports)

    def decay(self, factor: float) -> None:
        self.steps *= factor
        self.tokens *= factor
        self.squares *= factor

    def cap(self, steps: float) -> None:
        """Scale the counts to at most ``steps`` steps: the mean and spread kept, their
        weight against new steps bounded."""
        if self.steps > steps:
            self.decay(steps / self.steps)

    def add(self, tokens: int) -> None:
        self.steps += 1
        self.tokens += tokens
        self.squares += tokens * tokens
        self.runs += 1

    def upper(self, z: float) -> float | None:
        """Mean tokens per step plus ``z`` standard errors (the variance carries a prior of
        one token squared worth two steps, so a few equal steps do not look certain)."""
        if self.steps <= 0:
            return None
        mean = self.tokens / self.steps
        spread = max(self.squares - self.steps * mean * mean, 0.0)
        var = (spread + 2.0) / (self.steps + 1)
        return mean + z * math.sqrt(var / self.steps)


@dataclass
class DepthAcceptance:
    """Chain acceptance by depth, pooled over every chain step of any length; counts decay.

    A chain step of height h that accepted a tokens reached depths 1..min(a + 1, h) and
    accepted depths 1..a. The conditional acceptance at depth d then predicts the tokens a
    chain of any length emits per step, so every chain length is judged on the same text
    rather than on whichever stretch of it its own probe happened to see.
    """

    reached: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)

    def decay(self, factor: float) -> None:
        # Every step, for every way (the dispatcher's AUTO_FORGET): list comprehensions,
        # the same products as an index loop at a third of its host time.
        self.reached = [r * factor for r in self.reached]
        self.accepted = [a * factor for a in self.accepted]

    def cap(self, steps: float) -> None:
        """Scale the counts so at most ``steps`` steps reached depth 1: the acceptance at
        every depth is kept, its weight against new steps bounded."""
        if self.reached and self.reached[0] > steps:
            self.decay(steps / self.reached[0])

    def observe(self, height: int, accepted: int) -> None:
        """A step that drafted ``height`` tokens and accepted ``accepted`` of them."""
        deepest = min(accepted + 1, height)
        while len(self.reached) < deepest:
            self.reached.append(0.0)
            self.accepted.append(0.0)
        for d in range(deepest):
            self.reached[d] += 1
            if d < accepted:
                self.accepted[d] += 1

    def estimates(
        self, length: int, prior: DepthAcceptance | None = None, seen: bool = False
    ) -> list[tuple[float, float]]:
        """(P(depth d accepted | all shallower accepted), its count) for d = 1..``length``.
        Each estimate carries a prior worth two steps: ``prior``'s estimate at the depth
        when given (the pooled acceptance a context's own is drawn toward), else this
        one's at the shallower depth (one accept and one reject at depth 1). A depth seen a
        few times stays near the one above it, and a depth never reached takes its rate
        with no count: one unlucky look at depth 8 must not write off every depth past it
        (a lookup that was cut at 7 on that look would never be tried longer again).
        ``seen``: what was seen, the prior worth ``AUTO_MEAN_PRIOR_STEPS`` and none at
        depth 1 (a chain's mean)."""
        base = prior.estimates(length, seen=seen) if prior is not None else None
        weight = AUTO_MEAN_PRIOR_STEPS if seen else 2.0
        out, above = [], 0.0 if seen else 0.5
        for d in range(length):
            b = base[d][0] if base is not None else above
            n = self.reached[d] if d < len(self.reached) else 0.0
            a = self.accepted[d] if d < len(self.accepted) else 0.0
            above = (a + weight * b) / (n + weight)
            out.append((above, n))
        return out

    def conditional(self, depth: int, prior: DepthAcceptance | None = None) -> tuple[float, float]:
        """``estimates``' entry of ``depth``."""
        return self.estimates(depth, prior)[-1]

    def tokens(self, length: int, z: float = 0.0, prior: DepthAcceptance | None = None) -> float:
        """``tokens_by_length``' figure for ``length``."""
        return self.tokens_by_length(length, z, prior)[-1]

    def tokens_by_length(
        self, longest: int, z: float = 0.0, prior: DepthAcceptance | None = None
    ) -> list[float]:
        """Per chain length 1..``longest``: the mean tokens it emits per step (accepted +
        the bonus) plus ``z`` standard errors: each depth's error (its estimate over its
        count) carried to the tokens by the share of steps that reach it (the delta
        method), so a depth's doubt counts only as much as the steps that would use it."""
        return self.bounds_by_length(longest, z, prior)[1]

    def bounds_by_length(
        self,
        longest: int,
        z: float,
        prior: DepthAcceptance | None = None,
        seen: bool = False,
    ) -> tuple[list[float], list[float]]:
        """(``tokens_by_length`` with no errors, with ``z`` of them), in one pass; the
        first from ``estimates(seen=seen)``."""
        est = self.estimates(longest, prior)
        probs = [p for p, _ in est]
        counts = [n for _, n in est]
        reach = [1.0]
        for p in probs:
            reach.append(reach[-1] * p)
        mean_reach = reach
        if seen:
            mean_reach = [1.0]
            for p, _ in self.estimates(longest, prior, seen=True):
                mean_reach.append(mean_reach[-1] * p)
        # (One pass for every length, the dispatcher's per-step arithmetic: a length's
        # figures are those ``tokens(length)`` computes, in the C++ twin's order.)
        means: list[float] = []
        out: list[float] = []
        total = reach[0]
        mean = mean_reach[0]
        for length in range(1, longest + 1):
            total += reach[length]
            mean += mean_reach[length]
            means.append(mean)
            if not z:
                out.append(total)
                continue
            var, tail = 0.0, 0.0
            for d in range(length, 0, -1):
                tail += reach[d]  # tokens that depth d's acceptance multiplies
                p = probs[d - 1]
                g = tail / p
                var += g * g * p * (1 - p) / (counts[d - 1] + 2)
            out.append(min(length + 1.0, total + z * math.sqrt(var)))
        return means, out
