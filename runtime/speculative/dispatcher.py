"""The dispatcher (``--tree auto``): one choice per step among every way the step can go.

Like Meta's tree dispatcher and EAGLE's ``total_token=-1`` sweep, it picks what emits the
most tokens per second on this artifact and this machine, and it does so across drafters:

- **decode**: one ``target_decode``, no draft work at all (what target-only decoding does;
  offered when the policy is ``auto``);
- **lookup**: the drafter's offer (prompt lookup's match, ``Offer``), cut to its best prefix,
  judged by the acceptance seen under the same evidence (the matched n-gram's length: under
  sampling a 1-gram match rarely pays for its verify, a 3-gram one nearly always does),
  scored also in the steps that pass it over, against what they emitted (``shadow``);
- **each model shape** the drafter can grow: chains of every length (their acceptance pooled
  by depth, so a step of any chain informs every length, and so does a tree's first branch:
  the chain of the draft's top tokens; and whatever the lookup offered beside the step)
  and trees, each judged as its first branch's chain plus what its other branches were
  seen to add.
  (Judged on their own steps, trees looked best wherever they had last run: a tree run
  where prompt lookup matched kept that text's tokens per step in every other context.)

Each is rated by its optimistic tokens per step (``AUTO_Z`` standard errors over the mean)
over its predicted seconds (``costs.CostModel``: each call's recent median times plus the
median host work of its kind of step), and the best runs. Where the best on optimism is not
the best on its mean, the step is a probe: it runs only while what probes have lost stays
within ``AUTO_PROBE_SHARE`` of the time, else the best on its mean runs (a draft that never
pays costs at most that share). What a statistic saw decays by
``AUTO_DECAY`` at each of its own steps, so the text at hand soon outweighs earlier text and
a way that stops paying is dropped within a few dozen of its steps; and everything decays by
``AUTO_FORGET`` every step, so a way written off regains its optimism slowly and is probed
again now and then (a probe costs at most one step's loss); at each request's start by
``AUTO_REQUEST_DECAY``, so earlier requests are a prior the new text soon outweighs (each
way's at most ``AUTO_REQUEST_PRIOR_STEPS`` steps' worth). A decode
that leads every other way settles the steps after it (``AUTO_SETTLED_DRIFT``): those the
drafter offers nothing for decode without being rated, so a draft that never pays costs no
rating on most steps. Every estimate
is the same arithmetic in the C++ twin (``speculative/dispatcher.cpp``): on the same
recorded outcomes both choose the same way at every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from etspec.contract import (
    AUTO_DECAY,
    AUTO_FORGET,
    AUTO_MAX_CHAIN,
    AUTO_PROBE_CREDIT_STEPS,
    AUTO_PROBE_SHARE,
    AUTO_REQUEST_DECAY,
    AUTO_REQUEST_PRIOR_STEPS,
    AUTO_SETTLED_DRIFT,
    AUTO_SETTLED_STEPS,
    AUTO_Z,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.speculative.acceptance import DepthAcceptance, StepRecord
from etspec.runtime.speculative.costs import CostModel
from etspec.runtime.speculative.shapes import (
    ChainShape,
    Choice,
    NoDraftShape,
    TreePolicy,
    TreeShape,
    chain_cost,
)
from etspec.runtime.speculative.step import Offer, StepCosts, StepOutcome, step_kind


@dataclass
class Dispatcher(TreePolicy):
    """Chooses each step's way (module docstring) among ``shapes`` (the model's: none for a
    drafter without one), the step that drafts nothing (``decode``) and the drafter's
    offers (``lookup``)."""

    shapes: list[TreeShape]
    widths: tuple[int, ...]
    decode: bool = True
    lookup: bool = False
    model: CostModel | None = None
    # The model's chain acceptance by depth, pooled over every step whatever the lookup
    # offered beside it. (Kept per offer evidence as well, each context's record was a few
    # steps thin at each request's start, and a context whose chain3 steps never saw depths
    # 4-6 kept choosing chain3: on the bundled pair the C++ runner's auto ran chain3 on 116
    # steps at 0.66 tokens/ms against chain6's 0.87, and took 11% more steps than fixed
    # chain6. Per context the C++ auto ran 0.94-0.98 of chain6 in three runs; pooled, 1.006.)
    chains: DepthAcceptance = field(default_factory=DepthAcceptance)
    # Per tree: the tokens a step emitted beyond its first branch's (``_tree_tokens``).
    trees: dict[str, StepRecord] = field(default_factory=dict)
    # Lookup acceptance by depth per ``Offer.evidence``.
    evidence: dict[str, DepthAcceptance] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)  # steps per way, for reports
    rated: int = 0  # steps whose ways were rated (the rest were settled decodes)
    nothing: NoDraftShape = field(default_factory=NoDraftShape)

    def __post_init__(self) -> None:
        self._credit: float | None = None  # the probe account (``AUTO_PROBE_SHARE``), s
        self._probing: float | None = None  # the last choice was a probe: the best mean rate
        self._settled = 0  # steps left that decode unrated (AUTO_SETTLED_DRIFT)
        self.shapes = [s for s in self.shapes if s.cost.max_nodes]
        if not self.shapes and not self.lookup:
            raise EtspecError(message("auto_no_candidates"))
        self.widths = tuple(sorted(self.widths))
        self.model = self.model or CostModel(self.widths)
        self.trees = {s.name: StepRecord() for s in self.shapes if not _chain(s)}
        # Each tree's first branch: how deep it went at its last step (before any, the
        # tree's height: a static tree's first branch is its deepest, most often).
        self._branch = {s.name: s.cost.max_height for s in self.shapes if not _chain(s)}
        self._longest = max((s.cost.max_height for s in self.shapes if _chain(s)), default=0)
        self._deepest = max([self._longest, *self._branch.values()])

    def candidates(self) -> list[TreeShape]:
        return ([self.nothing] if self.decode else []) + list(self.shapes)

    @property
    def takes_offers(self) -> bool:
        return self.lookup

    def needs_costs(self) -> bool:
        # Once: a call no step made for long costs its probe time scaled (``CostModel``),
        # not a new timing.
        assert self.model is not None
        return not self.model.ready

    def use_costs(self, costs: StepCosts) -> None:
        assert self.model is not None
        self.model.add_probe(costs)

    def costs(self) -> StepCosts:
        assert self.model is not None
        return self.model.costs()

    # --- the choice -------------------------------------------------------------------------

    def choose(self, offer: Offer | None = None, height: int = 1 << 30) -> Choice:
        offered = self.lookup and offer is not None and bool(offer.tokens)
        if self._settled > 0 and not offered:
            self._settled -= 1
            self._probing = None
            return Choice(self.nothing)
        self._settled = 0
        self.rated += 1
        costs, z = self.costs(), AUTO_Z
        deepest = min(self._deepest, height)
        # A chain's mean is what was seen (AUTO_MEAN_PRIOR_STEPS): a draft never seen to
        # agree is never sure to pay, so its steps are probes the account charges. (A
        # lookup's keeps the even prior: it runs no draft, and a wrong one costs a few rows.)
        # Each depth drawn toward the pooled estimate itself (two steps' worth; a mean's
        # AUTO_MEAN_PRIOR_STEPS): with no prior but the shallower depth's, a draft seen on
        # a few steps fell toward never agreeing, and a draft that pays 5% over a decode
        # lost to it on 90% of steps under bursts of load (56% with the pooled prior).
        means, chains = self.chains.bounds_by_length(deepest, z, self.chains, seen=True)
        # The best way by optimism (``best``) and by its mean alone (``sure``): (rate, mean
        # rate, choice) each.
        best: tuple[float, float, Choice] | None = None
        sure: tuple[float, Choice] | None = None
        rival = 0.0  # the best optimistic rate of a way that drafts
        if self.decode:
            rate = 1.0 / costs.predict(self.nothing.cost, self.widths)
            best, sure = (rate, rate, Choice(self.nothing)), (rate, Choice(self.nothing))
        for shape in self.shapes:
            cost = shape.cost
            if _chain(shape):
                # The budget's last tokens: a chain grows what is left (a shorter chain, also
                # a candidate, then ties with it and comes first).
                cost = chain_cost(min(cost.max_height, height))
                tokens, mean = chains[cost.max_height - 1], means[cost.max_height - 1]
            else:
                tokens, mean = self._tree_tokens(shape, chains, means, z)
            seconds = costs.predict(cost, self.widths)
            rate = min(tokens, cost.max_height + 1.0) / seconds
            mean_rate = min(mean, cost.max_height + 1.0) / seconds
            rival = max(rival, rate)
            if best is None or rate > best[0]:
                best = (rate, mean_rate, Choice(shape))
            if sure is None or mean_rate > sure[0]:
                sure = (mean_rate, Choice(shape))
        if self.lookup and offer is not None and offer.tokens:
            seen = self.evidence.get(offer.evidence) or DepthAcceptance()
            longest = min(len(offer.tokens), height, self.widths[-1] - 1)
            by_mean, by_length = seen.bounds_by_length(longest, z)
            for m in range(1, longest + 1):
                seconds = costs.predict(chain_cost(m), self.widths, model=False)
                rate, mean_rate = by_length[m - 1] / seconds, by_mean[m - 1] / seconds
                rival = max(rival, rate)
                # Ties go to the lookup: it costs no draft call.
                if best is None or rate >= best[0]:
                    best = (rate, mean_rate, Choice(self.nothing, m))
                if sure is None or mean_rate >= sure[0]:
                    sure = (mean_rate, Choice(self.nothing, m))
        if best is None or sure is None:  # a lookup-only drafter with nothing to offer
            return Choice(self.nothing)
        self._probing = None
        if best[1] < sure[0]:
            # A probe: it runs only while the probe account is not in debt, and what it
            # loses against the best mean rate is charged to it (``observe``).
            if self._credit is not None and self._credit < 0:
                return sure[1]
            self._probing = sure[0]
        elif best[2].decodes:
            # Settled: a rival's rating gains at most AUTO_SETTLED_DRIFT of the decode's a
            # step, so the next steps the drafter offers nothing for decode unrated.
            lead = (1.0 - rival / best[0]) / AUTO_SETTLED_DRIFT
            self._settled = min(AUTO_SETTLED_STEPS, int(lead))
        return best[2]

    def _tree_tokens(
        self, shape: TreeShape, chains: list[float], means: list[float], z: float
    ) -> tuple[float, float]:
        """(Optimistic, mean) tokens per step of a tree: its first branch's chain figures
        plus what its other branches added (``z`` standard errors over it); never run, as
        many as it can emit and no more than its first branch (unknown)."""
        rec = self.trees[shape.name]
        branch = min(self._branch[shape.name], len(chains))
        chain, chain_mean = (chains[branch - 1], means[branch - 1]) if branch else (1.0, 1.0)
        upper = rec.upper(z)
        if upper is None:
            return shape.cost.max_height + 1.0, chain_mean
        return chain + upper, chain_mean + rec.tokens / rec.steps

    def _decay_all(self, factor: float) -> None:
        for acc in (self.chains, *self.evidence.values()):
            acc.decay(factor)
        for rec in self.trees.values():
            rec.decay(factor)

    def begin(self) -> None:
        self._decay_all(AUTO_REQUEST_DECAY)
        for acc in (self.chains, *self.evidence.values()):
            acc.cap(AUTO_REQUEST_PRIOR_STEPS)
        for rec in self.trees.values():
            rec.cap(AUTO_REQUEST_PRIOR_STEPS)
        self._settled = 0

    def observe(self, choice: Choice, step: StepOutcome) -> None:
        self._decay_all(AUTO_FORGET)
        # The probe account: every step earns AUTO_PROBE_SHARE of its seconds (up to what
        # AUTO_PROBE_CREDIT_STEPS such steps earn); a probe pays what it lost.
        # It opens full, at the first step: a runner's first request may explore.
        earned = AUTO_PROBE_SHARE * step.seconds
        full = earned * AUTO_PROBE_CREDIT_STEPS
        self._credit = full if self._credit is None else min(self._credit + earned, full)
        if self._probing is not None:
            self._credit -= max(0.0, step.seconds - step.emitted / self._probing)
            self._probing = None
        shape = choice.shape
        name = f"lookup{choice.lookup}" if choice.lookup else shape.name
        self.runs[name] = self.runs.get(name, 0) + 1
        kind = step_kind(chain_cost(step.height) if choice.lookup or _chain(shape) else shape.cost)
        assert self.model is not None
        self.model.observe(kind, step)
        # What a statistic saw before weighs less at each of its own steps (AUTO_DECAY).
        if choice.lookup:
            if step.evidence is not None and step.height:
                seen = self.evidence.setdefault(step.evidence, DepthAcceptance())
                seen.decay(AUTO_DECAY)
                seen.observe(step.height, step.accepted)
        elif _chain(shape):
            if step.height:
                self._observe_chain(step.height, step.accepted)
        elif shape.name in self.trees:
            self.trees[shape.name].decay(AUTO_DECAY)
            self.trees[shape.name].add(step.emitted - step.main_accepted - 1)
            self._branch[shape.name] = step.main_height
            if step.main_height:
                # Its first branch is the chain the draft would have drafted: chains learn
                # from the trees' steps too, so a chain that accepts as often as a tree is
                # not left at its prior once the trees have records.
                self._observe_chain(step.main_height, step.main_accepted)

    def shadow(self, offer: Offer, emitted: Sequence[int]) -> None:
        """Score the offer a step passed over against what the step emitted, as if it had
        been verified: its tokens agree with the emitted ones up to ``matched``; a
        disagreement inside them is the rejection a verify would have made, and agreement
        through all of them a step seen that deep. Sampled, the emitted token is a draw
        from the target's distribution, so it agrees with a lookup token with the
        probability a verify accepts it. Without this an offer whose evidence lost once
        was never verified again while the model's chains won (greedy answers from a
        passage: the default at 0.83 of prompt lookup alone)."""
        if not self.lookup or not offer.tokens or not emitted:
            return
        n = min(len(offer.tokens), len(emitted))
        matched = next((i for i in range(n) if offer.tokens[i] != emitted[i]), n)
        # No AUTO_DECAY here: what the offer's own verifies taught at deeper depths, which a
        # passed-over step cannot see, would fade at every step that passes it over.
        self.evidence.setdefault(offer.evidence, DepthAcceptance()).observe(
            matched + 1 if matched < n else matched, matched
        )

    def _observe_chain(self, height: int, accepted: int) -> None:
        self.chains.decay(AUTO_DECAY)
        self.chains.observe(height, accepted)

    def estimate(self, shape: TreeShape) -> float:
        """Expected tokens/s of ``shape`` by the model (no optimism)."""
        costs = self.costs()
        if not shape.cost.max_nodes:
            return 1.0 / costs.predict(shape.cost, self.widths)
        if _chain(shape):
            tokens = self.chains.tokens(shape.cost.max_height)
        else:
            # Its first branch's chain plus what the other branches added.
            rec, branch = self.trees[shape.name], self._branch[shape.name]
            tokens = (self.chains.tokens(branch) if branch else 1.0) + (
                rec.tokens / rec.steps if rec.steps > 0 else 0.0
            )
        return tokens / costs.predict(shape.cost, self.widths)

    def report(self) -> dict[str, dict[str, float]]:
        """Per candidate: steps run, estimated tokens/s and predicted step seconds; per
        lookup length run, its steps."""
        out: dict[str, dict[str, float]] = {}
        ready = self.model is not None and self.model.ready
        for s in self.candidates():
            out[s.name] = {
                "steps": self.runs.get(s.name, 0),
                "estimated_tokens_per_s": self.estimate(s) if ready else 0.0,
                "predicted_step_s": self.costs().predict(s.cost, self.widths) if ready else 0.0,
            }
        for name, steps in sorted(self.runs.items()):
            if name.startswith("lookup"):
                out[name] = {"steps": steps}
        return out


def _chain(shape: TreeShape) -> bool:
    return isinstance(shape, ChainShape)


def auto_chain_lengths(longest: int) -> range:
    """Chain lengths ``--tree auto`` weighs: 1 .. ``longest`` (at most ``AUTO_MAX_CHAIN``)."""
    return range(1, min(longest, AUTO_MAX_CHAIN) + 1)
