"""The tree-budget dispatcher (``--tree auto``) and the ``--tree`` settings.

Like Meta's tree dispatcher and EAGLE's ``total_token=-1`` sweep, ``AutoTree`` picks the
shape that emits the most tokens per second on this artifact and this machine:

- Costs are measured, not assumed: before its first step the generator times
  ``target_verify`` at every compiled width and the draft runner's own calls (on scratch
  slots, which hold nothing between steps; ``costs.measure_costs``) and hands them over
  (``use_costs``), giving each candidate a predicted step time.
- Costs are measured again at the step that reaches ``AUTO_REMEASURE_AFTER`` steps, within
  the request that reaches it: the first measurement runs in a cold process (the warm-up
  request), and a wrong cost table would steer every later choice.
- Acceptance is observed. Chains pool theirs by depth (``DepthAcceptance``): a step of any
  chain informs every chain length. Trees are judged on their own steps.
- Each step runs the candidate with the highest upper confidence bound of tokens/s (step
  wall time measured with everything included): close competitors keep being sampled
  until the estimates tell them apart; a candidate whose optimistic bound (every draft
  token accepted) is below what another surely achieves is never run at all. A chain's
  bound is its mean tokens plus the doubt of each depth's estimate, weighted by the share
  of steps that reach that depth: a depth a shorter chain never reaches borrows the
  deepest reached one's rate with a wide error, so a longer chain is tried where the
  depths it adds would be reached often, and not where the draft seldom gets that far.
- A chain found by a drafter that says how (``Proposal.evidence``: prompt lookup's matched
  n-gram length) is then cut to the prefix with the most tokens/s (``trim``), by the
  acceptance seen under the same evidence. Sampled lookup on a base model matches single
  tokens often and those rarely pay, while long matches nearly always do: one chain length
  for every step would either waste verifies on the first or give up the second. Once a
  drafter has given evidence, the longest chain stands for every chain and for drafting
  nothing, since a cut reaches any of them step by step.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace

from etspec.contract import AUTO_REMEASURE_AFTER, AUTO_TIME_PRIOR_STEPS, AUTO_TRIM_Z, message
from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.shapes import ChainShape, TreePolicy, TreeShape, chain_cost
from etspec.runtime.speculative.step import StepCosts, StepOutcome, fixed_costs


@dataclass
class StepRecord:
    """Tokens and seconds of the steps one candidate ran."""

    steps: int = 0
    tokens: int = 0
    squares: int = 0  # sum of squared tokens per step, for the spread
    seconds: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        self.steps += 1
        self.tokens += tokens
        self.squares += tokens * tokens
        self.seconds += seconds

    @property
    def stderr(self) -> float:
        """Standard error of the mean tokens per step. The variance carries a prior of one
        token squared worth two steps, so a few identical steps do not look certain."""
        if not self.steps:
            return math.inf
        mean = self.tokens / self.steps
        spread = max(self.squares - self.steps * mean * mean, 0.0)
        var = (spread + 2 * 1.0) / (self.steps + 1)
        return math.sqrt(var / self.steps)

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def step_s(self) -> float:
        return self.seconds / self.steps if self.steps else 0.0


@dataclass
class DepthAcceptance:
    """Chain acceptance by depth, pooled over every chain step of any length.

    A chain step of height h that accepted a tokens reached depths 1..min(a + 1, h) and
    accepted depths 1..a. The conditional acceptance at depth d then predicts the tokens a
    chain of any length emits per step, so every chain length is judged on the same text
    rather than on whichever stretch of it its own probe happened to see.
    """

    reached: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def observe(self, height: int, accepted: int, allowed: int | None = None) -> None:
        """A step that drafted ``height`` tokens and accepted ``accepted`` of them. When
        every drafted token was accepted but the drafter offered fewer than ``allowed``
        (prompt lookup's match ran out), depth ``height + 1`` counts as reached and not
        accepted: the step ended there as a rejection would have ended it. Otherwise the
        depths past a short proposal would be judged only on the steps that did reach them
        (the long matches of repetitive stretches), and a long chain would look better than
        it runs (sampled lookup on chat prompts: 79.7 tok/s estimated, 58.8 run)."""
        deepest = min(accepted + 1, height)
        if allowed is not None and accepted == height < allowed:
            deepest = height + 1
        while len(self.reached) < deepest:
            self.reached.append(0)
            self.accepted.append(0)
        for d in range(deepest):
            self.reached[d] += 1
            self.accepted[d] += d < accepted

    def conditional(self, depth: int) -> float:
        """P(depth ``depth`` accepted | all shallower accepted); unseen depths borrow the
        deepest seen one (a Laplace prior of one accept and one reject keeps it in (0, 1))."""
        seen = [d for d in range(len(self.reached)) if self.reached[d]]
        if not seen:
            return 0.5
        d = min(depth - 1, seen[-1])
        while not self.reached[d]:
            d -= 1
        return (self.accepted[d] + 1) / (self.reached[d] + 2)

    def borrowed_upper(self, length: int, z: float) -> list[float]:
        """Upper confidence bounds of depths 1..``length``, each estimated with a prior of
        two steps at the shallower depth's estimate (depth 1: one accept, one reject) plus
        ``z`` standard errors. A depth seen once and rejected stays near its shallower one
        instead of condemning every longer cut (``trim`` never reaches it to learn again)."""
        out, prior = [], 0.5
        for d in range(length):
            n = self.reached[d] if d < len(self.reached) else 0
            a = self.accepted[d] if d < len(self.accepted) else 0
            p = (a + 2 * prior) / (n + 2)
            out.append(min(1.0, p + z * math.sqrt(p * (1 - p) / (n + 2))))
            prior = p
        return out

    def expected_tokens(self, length: int, z: float | None = None) -> float:
        """Mean tokens a chain of ``length`` emits per step (accepted + the bonus); with
        ``z``, its upper confidence bound: the mean plus ``z`` standard errors, each depth's
        error (its Laplace estimate over its own count; an unseen depth counts none) carried
        to the tokens by the share of steps that reach it (the delta method).

        Bounding each depth on its own and multiplying the bounds rated a long chain on its
        deep depths' wide bounds, which a weak draft reaches too seldom to tighten: on Gemma 3
        270M (a third of draft tokens accepted) ``--tree auto`` ran chain7 on most steps at
        0.75x the tokens/s of chain3. Here a depth's doubt counts only as much as the steps
        that would use it."""
        probs = [self.conditional(d) for d in range(1, length + 1)]
        reach = [1.0]
        for p in probs:
            reach.append(reach[-1] * p)
        total = sum(reach)
        if z is None:
            return total
        var, tail = 0.0, 0.0
        for d in range(length, 0, -1):
            tail += reach[d]  # tokens that depth d's acceptance multiplies
            p = probs[d - 1]
            n = self.reached[d - 1] if d <= len(self.reached) else 0
            g = tail / p
            var += g * g * p * (1 - p) / (n + 2)
        return min(length + 1.0, total + z * math.sqrt(var))


@dataclass
class AutoTree(TreePolicy):
    """Chooses among ``shapes`` by measured cost and observed acceptance (module docstring).

    Each step runs the candidate with the highest upper confidence bound of tokens/s,
    ``(mean tokens + z * standard error) / step seconds`` with UCB1's ``z = sqrt(2 ln
    steps)``: a candidate that might be better keeps being tried until its estimate is tight
    enough to tell, and one clearly worse stops being run. A candidate never run is bounded
    by its optimistic rate, so each one that could win is tried early. Chains need no trial
    of their own: acceptance pools across chain lengths and their step time follows from the
    measured costs plus the per-step overhead measured on the chains that did run.
    """

    shapes: list[TreeShape]
    widths: tuple[int, ...]
    costs: StepCosts | None = None
    records: dict[str, StepRecord] = field(default_factory=dict)
    chains: DepthAcceptance = field(default_factory=DepthAcceptance)
    chain_steps: StepRecord = field(default_factory=StepRecord)  # every chain step, pooled
    # Chain acceptance by depth per ``Proposal.evidence`` (what ``trim`` reads).
    evidence: dict[str, DepthAcceptance] = field(default_factory=dict)
    _total: int = 0  # steps observed
    _decided: int = 0  # ``_total`` when ``_current`` was chosen
    _current: TreeShape | None = None
    _remeasured: bool = False
    # Recent measured-minus-predicted step seconds of chain (True) and tree (False) steps.
    _extra: dict[bool, deque[float]] = field(
        default_factory=lambda: {True: deque(maxlen=64), False: deque(maxlen=64)}
    )

    def __post_init__(self) -> None:
        if not self.shapes:
            raise EtspecError(message("auto_no_candidates"))
        self.records = {s.name: StepRecord() for s in self.shapes}

    def candidates(self) -> list[TreeShape]:
        return list(self.shapes)

    def _overhead(self, shape: TreeShape) -> float:
        """Seconds a step takes beyond the per-method costs (Python, cold caches and, for
        trees, commits): the median over recent steps of the same kind (chain or tree) when
        there are any, so a few outliers (a first call, a hiccup) do not shift it."""
        chain = isinstance(shape, ChainShape)
        extra = self._extra[chain] or self._extra[not chain]
        return statistics.median(extra) if extra else 0.0

    def _predicted_seconds(self, shape: TreeShape) -> float:
        if self.costs is None:
            return 0.0
        return self.costs.predict(shape.cost, self.widths) + self._overhead(shape)

    def _ran_seconds(self, shape: TreeShape, step: StepOutcome) -> float:
        """Predicted seconds of the step as it ran: a chain that drafted fewer tokens than
        its length (a short lookup match, a cut) verified a narrower tree."""
        assert self.costs is not None
        cost = chain_cost(step.height) if isinstance(shape, ChainShape) else shape.cost
        return self.costs.predict(cost, self.widths)

    def step_seconds(self, shape: TreeShape) -> float:
        """Mean step time: measured, with the prediction counted as ``AUTO_TIME_PRIOR_STEPS``
        steps."""
        return self._blend(shape, self._predicted_seconds(shape))

    def _blend(self, shape: TreeShape, prior: float) -> float:
        rec = self.records[shape.name]
        if self.costs is None:
            return rec.step_s
        weight = AUTO_TIME_PRIOR_STEPS
        return (rec.seconds + weight * prior) / (rec.steps + weight)

    def optimistic_rate(self, shape: TreeShape) -> float:
        """Tokens/s if every draft token were accepted."""
        seconds = self.step_seconds(shape)
        return (shape.cost.max_height + 1) / seconds if seconds > 0 else math.inf

    def _tokens(self, shape: TreeShape, z: float | None = None) -> float | None:
        """Mean tokens per step or, with ``z``, its upper confidence bound (None: no data
        yet). Chains read the pooled depth acceptance, so every chain step informs every
        chain length, and bound it depth by depth."""
        if isinstance(shape, ChainShape):
            if not self.chain_steps.steps:
                return None
            return self.chains.expected_tokens(shape.length, z)
        rec = self.records[shape.name]
        if not rec.steps:
            return None
        return rec.tokens / rec.steps + (z or 0.0) * rec.stderr

    def estimate(self, shape: TreeShape) -> float:
        """Expected tokens/s of ``shape`` (0 with no data)."""
        tokens, seconds = self._tokens(shape), self.step_seconds(shape)
        return tokens / seconds if tokens is not None and seconds > 0 else 0.0

    def upper_bound(self, shape: TreeShape) -> float:
        # UCB1's widening z: an unlucky early estimate is retried eventually, not never.
        z = math.sqrt(2 * math.log(max(self._total, 2)))
        tokens = self._tokens(shape, z)
        # Optimistic in time too: a few slow steps (a cold cache, a scheduler hiccup) must
        # not condemn a shape that then never runs again to correct them.
        prior = self._predicted_seconds(shape)
        seconds = min(self._blend(shape, prior), prior or math.inf)
        if tokens is None or seconds <= 0 or seconds == math.inf:
            return self.optimistic_rate(shape)
        return min(tokens, shape.cost.max_height + 1) / seconds

    def needs_costs(self) -> bool:
        return self.costs is None or (not self._remeasured and self._total >= AUTO_REMEASURE_AFTER)

    def use_costs(self, costs: StepCosts) -> None:
        if self.costs is not None:
            # The second measurement: the overheads were measured against the first table.
            self._remeasured = True
            for extra in self._extra.values():
                extra.clear()
        self.costs = costs

    def _choices(self) -> list[TreeShape]:
        """The shapes ``choose`` weighs: all of them, or, once the drafter has given
        evidence (``trim`` then cuts each chain), the longest chain in place of every chain."""
        if not self.evidence:
            return self.shapes
        chains = [s for s in self.shapes if isinstance(s, ChainShape)]
        longest = max(chains, key=lambda s: s.length)
        return [s for s in self.shapes if s is longest or not isinstance(s, ChainShape)]

    def choose(self) -> TreeShape:
        # Deciding costs a fraction of a millisecond; once past the first steps (where
        # every step's outcome moves the bounds a lot) it is redone every few steps only.
        if self._current is None or self._total < 64 or self._total - self._decided >= 8:
            self._current = max(self._choices(), key=self.upper_bound)
            self._decided = self._total
        return self._current

    def trim(self, shape: TreeShape, offered: int, evidence: str) -> int:
        """The prefix of an ``offered``-token chain with the highest tokens/s: each depth's
        acceptance under this evidence (``borrowed_upper``) counted ``AUTO_TRIM_Z`` standard
        errors optimistic, over the predicted step seconds of a chain that long (0: a plain
        decode). The shortest of equal prefixes wins."""
        if self.costs is None or not isinstance(shape, ChainShape):
            return offered
        seen = self.evidence.get(evidence) or DepthAcceptance()
        uppers = seen.borrowed_upper(offered, AUTO_TRIM_Z)
        overhead = self._overhead(shape)
        best, best_rate = 0, 0.0
        tokens, reach = 1.0, 1.0
        for m in range(offered + 1):
            if m:
                reach *= uppers[m - 1]
                tokens += reach
            rate = tokens / (self.costs.predict(chain_cost(m), self.widths) + overhead)
            if rate > best_rate:
                best, best_rate = m, rate
        return best

    def observe(self, shape: TreeShape, step: StepOutcome) -> None:
        if not step.follows_shape:
            return
        self._total += 1
        self.records[shape.name].add(step.emitted, step.seconds)
        if self.costs is not None:
            extra = step.seconds - self._ran_seconds(shape, step)
            self._extra[isinstance(shape, ChainShape)].append(extra)
        if isinstance(shape, ChainShape) and shape.length:  # drafting nothing teaches nothing
            self.chains.observe(step.height, step.accepted, step.allowed)
            self.chain_steps.add(step.emitted, step.seconds)
            if step.evidence is not None and step.height:
                # Only depths the proposal offered: what a cut can choose among.
                seen = self.evidence.setdefault(step.evidence, DepthAcceptance())
                seen.observe(step.height, step.accepted)

    def for_request(self, sampler: Sampler) -> TreePolicy:
        if sampler.greedy or sampler.config.seed is None:
            return self  # greedy output is the same whatever runs; unseeded need not repeat
        return SeededAutoTree(self.shapes, self.widths, costs=fixed_costs(self.widths))

    def report(self) -> dict[str, dict[str, float]]:
        """Per candidate: steps run, measured and estimated tokens/s, predicted step
        seconds."""
        out = {}
        for s in self.shapes:
            rec = self.records[s.name]
            out[s.name] = {
                "steps": rec.steps,
                "tokens_per_s": rec.rate,
                "estimated_tokens_per_s": self.estimate(s),
                "predicted_step_s": self.costs.predict(s.cost, self.widths) if self.costs else 0.0,
            }
        return out


class SeededAutoTree(AutoTree):
    """``--tree auto`` for one seeded sampling request: the same choice rule, priced by
    fixed costs (``costs.fixed_costs``) and fed each step's predicted time instead of its
    measured one. The shapes the request runs, and with them its random stream, then follow
    from the seed, the prompt and the acceptance alone: the same ids on every run, in every
    process. A fresh one serves each request (``AutoTree.for_request``)."""

    def needs_costs(self) -> bool:
        return False

    def observe(self, shape: TreeShape, step: StepOutcome) -> None:
        assert self.costs is not None
        super().observe(shape, replace(step, seconds=self._ran_seconds(shape, step)))
