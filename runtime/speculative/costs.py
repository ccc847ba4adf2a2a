"""What one speculative step costs on this machine now (the dispatcher's cost model).

Before the first step the cost probe times the target's verify widths, a decode and the draft
runner's own calls (``measure_costs``; each draft runner times its calls with the probe it
is handed, so a new drafter brings its own probes and nothing here names one). From then on
every step reports what its calls took, and ``CostModel`` keeps the recent observations: a
method costs the median of its last ``AUTO_COST_WINDOW`` calls, and the host work around
the calls of each kind of step the median of its recent steps. A draft's work is three
prices: the catch-up that starts a proposal (an extend over what the target committed
since), a chain's level and a tree's level (which gathers its parents' states and masks):
one price per draft call, the mix of all three, made a long chain look twice its cost on
the bundled pair, and ``auto`` ran chains too short. Host work is kept per kind of step and
verify width (``host_key``), with the kind's own as the price of a width not yet seen: it
grows with the rows a step walks (sampled, each walked row is turned into a distribution
over a 262k vocabulary), and one median per kind priced Gemma 3 270M's sampled 15-token
lookups at the 1.1 ms of the 4-row steps that made most of it, against their own 4.3-6.6
ms (a fifth of the step). A median follows a machine
that slows down or speeds up (background load, a context that grows) within a window, a few
slow calls (a scheduler hiccup) do not move it, and it prices a step as it runs on average
(the least of each call's times priced a two-call step as optimistically as the spread of
two calls allows: Gemma 3 270M then ran chain1 where a decode was faster). Both runtimes
price every way a step can go from these.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import replace

import torch

from etspec.contract import (
    AUTO_COST_MIN_CALLS,
    AUTO_COST_WINDOW,
    AUTO_STALE_STEPS,
    COST_DECODE,
    COST_DRAFT,
    COST_EXTEND,
    COST_VERIFY,
    STEP_CHAIN,
    STEP_DECODE,
    STEP_TREE,
    TARGET_COMMIT,
    TARGET_DECODE,
    TargetMetadata,
)
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.step import CostProbe, StepCosts, StepOutcome, host_key

# Keys of the calls a step makes: a decode, one draft level, the draft's catch-up (the
# extend that starts a proposal), a verify per width.
DECODE, DRAFT, EXTEND = COST_DECODE, COST_DRAFT, COST_EXTEND


def verify_key(width: int) -> str:
    return f"{COST_VERIFY}{width}"


class Window:
    """A call's (or a kind of step's) last ``AUTO_COST_WINDOW`` seconds and their median,
    computed once per change (the cost model is rebuilt every step, and a step changes one
    or two windows)."""

    __slots__ = ("_median", "at", "values")

    def __init__(self) -> None:
        self.values: deque[float] = deque(maxlen=AUTO_COST_WINDOW)
        self.at: deque[int] = deque(maxlen=AUTO_COST_WINDOW)  # the step each was taken at
        self._median: float | None = None

    def add(self, seconds: float, at: int = 0) -> None:
        self.values.append(seconds)
        self.at.append(at)
        self._median = None

    def forget_before(self, step: int) -> None:
        """Drops the times taken before ``step``."""
        while self.at and self.at[0] < step:
            self.at.popleft()
            self.values.popleft()
            self._median = None

    def __len__(self) -> int:
        return len(self.values)

    def median(self) -> float:
        if self._median is None:
            self._median = statistics.median(self.values)
        return self._median


def ordered(prices: list[float], evidence: list[int]) -> list[float]:
    """``prices`` (by rows, ascending) made never to fall as rows grow, each conflict
    settled by the price with more step calls behind it (a tie: the narrower's, a floor).

    A floor alone let a rarely used width's few calls price every wider one: on the
    bundled pair the C++ runner's 4-row verify kept 4 calls at 4.82 ms from early in a
    run to its end, while the 7-row verify's own 16 calls took 2.9-3.5 ms; every 7-row
    step was priced 4.82 ms and the 8- and 16-row verifies at only 1.1-1.25x it, so
    ``auto`` bought wide trees. The best-evidenced price stands; each other is held
    between the prices already settled below and above it. A tie keeps the floor: a
    verify timed before the machine slowed must not undercut the decode timed since."""
    settled: list[float | None] = [None] * len(prices)
    for i in sorted(range(len(prices)), key=lambda i: (-evidence[i], i)):
        below = max((p for p in settled[:i] if p is not None), default=0.0)
        above = min((p for p in settled[i + 1 :] if p is not None), default=float("inf"))
        settled[i] = min(max(prices[i], below), above)
    return [p for p in settled if p is not None]


class CostModel:
    """What each method call and each kind of step's host work costs now.

    A call's cost is the median of its last ``AUTO_COST_WINDOW`` calls by steps once it has
    ``AUTO_COST_MIN_CALLS`` of them. Before that (a verify width no step has used yet) it
    is the probe's time scaled as the target's observed calls compare with their own probe
    times: the probe runs on scratch slots under a mask of its own and in a moment of its
    own, so its times are right in ratio, not in level (on Gemma 3 270M a probed verify
    cost 15-20% more than the same width inside steps at a short context). A call's time
    counts for ``AUTO_STALE_STEPS`` steps: a width the choice has stopped using is priced
    from its probe again, with no program call, instead of by the few calls it had when it
    was dropped (on the bundled pair a 7-row verify's 16 calls from a slow stretch priced
    it 6.1 ms for the rest of a run while its calls took 4.35 ms (median), and ``auto``
    ran chain3 where chain6 was faster).
    """

    def __init__(self, widths: tuple[int, ...], step_width: int = 1) -> None:
        self.widths = tuple(sorted(widths))
        self.step_width = step_width
        self._calls: dict[str, Window] = {}  # by steps only
        self._probe: dict[str, float] = {}  # the latest probe's time per call
        self._overhead: dict[str, Window] = {}
        # A tree's level calls, apart from a chain's (``StepCosts.tree_level_s``); kept and
        # forgotten with its host work.
        self._levels: dict[str, Window] = {}
        self._overhead_seen: dict[str, int] = {}  # per kind of step: the step it last ran at
        self._costs: StepCosts | None = None
        self.steps = 0  # steps observed
        self._ready = False

    @staticmethod
    def _add(table: dict[str, Window], key: str, seconds: float) -> None:
        window = table.get(key)
        if window is None:
            window = table[key] = Window()
        window.add(seconds)

    def _observe_call(self, key: str, seconds: float) -> None:
        window = self._calls.get(key)
        if window is None:
            window = self._calls[key] = Window()
        window.add(seconds, self.steps)
        self._costs = None

    def _forget_stale(self) -> None:
        """Call times taken ``AUTO_STALE_STEPS`` steps ago or more stop counting."""
        since = self.steps - AUTO_STALE_STEPS + 1
        for key, window in list(self._calls.items()):
            if window.at[0] < since:  # most steps: none (one look per call)
                window.forget_before(since)
                if not window.values:
                    del self._calls[key]

    def add_probe(self, probe: StepCosts) -> None:
        """What the cost probe measured (a zero: not timed)."""
        if probe.step_width:
            self.step_width = probe.step_width
        timed = {verify_key(w): s for w, s in probe.verify_s.items()}
        timed.update({DECODE: probe.decode_s, DRAFT: probe.draft_s, EXTEND: probe.extend_s})
        for key, seconds in timed.items():
            if seconds > 0:
                self._probe[key] = seconds
                self._calls.pop(key, None)  # a fresh probe replaces a call's step times
        self._costs = None

    def observe(self, kind: str, step: StepOutcome) -> None:
        """One step of ``kind`` (``step.step_kind``): its calls and its host work."""
        self.steps += 1
        if step.rows:
            key = DECODE if kind == STEP_DECODE else verify_key(step.rows)
            self._observe_call(key, step.target_s)
        # The catch-up once per step (one extend, or a few after a long lookup run), then
        # the levels per call; with no level call the rest of the draft's time (picking a
        # one-token chain's token) is host work.
        if step.extend_calls:
            self._observe_call(EXTEND, step.extend_s)
        levels = step.draft_calls - step.extend_calls
        host = step.seconds - step.target_s - step.draft_s
        if levels > 0:
            level_s = (step.draft_s - step.extend_s) / levels
            if kind == STEP_TREE:
                self._add(self._levels, kind, level_s)
            else:
                self._observe_call(DRAFT, level_s)
        elif step.draft_calls:
            host += step.draft_s - step.extend_s
        keys = (kind, host_key(kind, step.rows)) if kind != STEP_DECODE and step.rows else (kind,)
        for key in keys:
            self._add(self._overhead, key, max(host, 0.0))
            self._overhead_seen[key] = self.steps
        self._forget_stale()
        for other, at in list(self._overhead_seen.items()):
            # A kind of step (or one of its widths) not run for AUTO_STALE_STEPS steps
            # forgets its host work, as a call forgets its times: an old price must not keep
            # it from being run again.
            if self.steps - at >= AUTO_STALE_STEPS:
                del self._overhead_seen[other], self._overhead[other]
                self._levels.pop(other, None)
        self._costs = None

    @property
    def ready(self) -> bool:
        """Whether every verify width has a cost (the probe ran; probe times are never
        dropped, so once ready, always)."""
        if not self._ready:
            self._ready = all(verify_key(w) in self._probe for w in self.widths)
        return self._ready

    def _evidence(self, key: str) -> int:
        """How many of a call's own step calls price it (0: its probe, scaled, does)."""
        window = self._calls.get(key)
        return len(window) if window and len(window) >= AUTO_COST_MIN_CALLS else 0

    def _call(self, key: str, scale: float) -> float | None:
        window = self._calls.get(key)
        if window and len(window) >= AUTO_COST_MIN_CALLS:
            return window.median()
        probed = self._probe.get(key)
        if probed is not None:
            return probed * scale
        return window.median() if window else None

    def _scale(self) -> float:
        """How the target's calls by steps compare with their probe times (the median
        ratio over the calls that have both; 1 before any has)."""
        ratios = [
            w.median() / self._probe[k]
            for k, w in self._calls.items()
            if k not in (DRAFT, EXTEND) and len(w) >= AUTO_COST_MIN_CALLS and self._probe.get(k)
        ]
        return statistics.median(ratios) if ratios else 1.0

    def costs(self) -> StepCosts:
        """The current estimates; a verify never costs less than a decode or a narrower
        verify, nor more than a wider one."""
        if self._costs is None:
            scale = self._scale()
            decode = self._call(DECODE, scale)
            keys = [verify_key(w) for w in self.widths]
            if decode is not None:
                keys.insert(0, DECODE)
            prices = ordered(
                [self._call(k, scale) or 0.0 for k in keys], [self._evidence(k) for k in keys]
            )
            verify = dict(zip(self.widths, prices[-len(self.widths) :], strict=True))
            if decode is not None:
                decode = prices[0]
            # Host work is priced once a kind of step has run AUTO_COST_MIN_CALLS times: a
            # step's first run pays one-time work (Gemma 3 270M's first chain step in Python,
            # 46 ms), and one such price kept the dispatcher from ever drafting again in a
            # run. Before, a kind costs a decode's host work, the least any step does (it
            # samples and emits a token): priced at nothing, a one-token chain looked as
            # cheap as a decode, and a draft that never agreed was sure to pay.
            host = {
                k: v.median() for k, v in self._overhead.items() if len(v) >= AUTO_COST_MIN_CALLS
            }
            if STEP_DECODE in host:
                for kind in (STEP_CHAIN, STEP_TREE):
                    host.setdefault(kind, host[STEP_DECODE])
            tree = self._levels.get(STEP_TREE)
            self._costs = StepCosts(
                verify,
                self._call(DRAFT, 1.0) or 0.0,
                self.step_width,
                decode if decode is not None else verify[self.widths[0]],
                host,
                self._call(EXTEND, 1.0) or 0.0,
                tree.median() if tree and len(tree) >= AUTO_COST_MIN_CALLS else 0.0,
            )
        return self._costs


def measure_costs(
    target: Program,
    draft: SpeculativeDraftRunner | None = None,
    probe: CostProbe | None = None,
    position: int | None = None,
) -> StepCosts:
    """The least wall time of each verify width, of a decode at ``position`` (the next slot
    to be committed; not timed without one) and of the draft runner's own calls, over
    ``probe.repeats`` rounds that each time every call once (a burst of background work then
    slows every call of a round alike, not one call's every repeat)."""
    probe = probe or CostProbe()
    meta = target.metadata
    assert isinstance(meta, TargetMetadata)
    layout = MaskLayout.of(meta)
    widths = list(meta.verify_widths)
    decode = position is not None and position < meta.max_context
    verify: dict[int, list[float]] = {w: [] for w in widths}
    decodes, steps, extends, step_width = [], [], [], 0
    for r in range(probe.repeats):
        once = replace(probe, repeats=1, warm_up=probe.warm_up and r == 0)
        for w in widths:
            verify[w].append(
                once.timed(target, meta.verify_method(w), *once.scratch_inputs(w, layout))
            )
        if decode:
            assert position is not None
            decodes.append(once.timed(target, TARGET_DECODE, *once.decode_inputs(position, layout)))
        if draft is not None:
            drafted = draft.step_costs(once)
            step_width = drafted.step_width
            steps.append(drafted.step_s)
            extends.append(drafted.extend_s)
    costs = StepCosts({w: min(v) for w, v in verify.items()}, step_width=step_width)
    if decodes:
        costs.decode_s = min(decodes)
    if draft is not None:
        costs.draft_s = min(steps) or min(extends)
        costs.extend_s = min(extends) or min(steps)
    # Load the commit too (copying scratch slots onto themselves): a tree's first commit
    # must not pay the method load inside a timed step.
    scratch = meta.max_context + torch.arange(meta.verify_width)
    target.run(TARGET_COMMIT, scratch, scratch)
    return costs
