"""CombinedDraftRunner: an EAGLE-3 draft and prompt lookup, chosen step by step.

Prompt lookup proposes, with no model call, what followed the latest earlier occurrence of
the last n tokens: it wins where the text repeats (code edits, quotes, a base model's loops)
and proposes nothing, or little of use, where it does not. The EAGLE-3 draft predicts text
that was never seen, at one draft call per tree level. Each step this runner asks the lookup
first (a few microseconds) and proposes its chain instead of the draft's shape when that
chain is expected to emit more tokens per second:

- the lookup's acceptance is learned by depth (``DepthAcceptance``) separately for each
  matched n-gram length: a 3-gram match predicts far better than a 1-gram one;
- the draft's tokens per step are learned per shape, and every step's wall time per shape
  (the draft's) or per verify width (the lookup's), from the steps each one ran;
- both are compared at their upper confidence bounds (UCB1's z, as ``--tree auto`` does), so
  an unlucky first look at either is retried, and the better one for the context wins once
  the estimates are tight; a depth the lookup's chains never reached borrows the deepest
  one reached (``lookup_tokens``).

Choosing a proposal from the past alone keeps decoding lossless: the verifier checks
whatever is proposed (a lookup token as a point mass, a draft token against the draft's
distribution). A seeded sampling request must give the same ids on every run, so it learns
afresh and prices each step by ``costs.fixed_costs`` instead of its wall time: its choices
then follow from the seed, the prompt and the acceptance alone.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from etspec.contract import COMBINED_METHOD, LOOKUP_LABEL, TargetMetadata, message
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.dispatcher import DepthAcceptance, StepRecord
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner, PromptLookupMethod
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import (
    Acceptance,
    DraftCosts,
    Proposal,
    StepCosts,
    StepOutcome,
    fixed_costs,
)

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec
    from etspec.runtime.speculative.step import CostProbe

# Step times kept per arm: recent ones, so a machine that slows down is followed.
_RECENT_STEPS = 32


@dataclass
class _Learned:
    """What the choice has learned: over a runner's life, or one seeded request's."""

    lookup: dict[int, DepthAcceptance] = field(default_factory=dict)  # per matched n
    model: dict[str, StepRecord] = field(default_factory=dict)  # per draft shape
    seconds: dict[str, deque[float]] = field(default_factory=dict)  # per arm
    steps: int = 0

    def step_s(self, arm: str) -> float | None:
        recent = self.seconds.get(arm)
        return statistics.median(recent) if recent else None

    def add_seconds(self, arm: str, seconds: float) -> None:
        self.seconds.setdefault(arm, deque(maxlen=_RECENT_STEPS)).append(seconds)


@dataclass(frozen=True)
class _Pending:
    """The last proposal, until its step's outcome arrives."""

    learned: _Learned
    arm: str
    shape: TreeShape
    ngram: int = 0  # the lookup's matched n (0: the draft proposed)
    width: int = 0  # the lookup's verify width


def lookup_tokens(accepted: DepthAcceptance | None, length: int, z: float) -> float:
    """Upper confidence bound of the tokens a lookup chain of ``length`` emits per step.
    Each depth's acceptance is bounded from its own count or, where the chains seen so far
    never reached it, from the deepest depth reached (count included): a 15-token chain is
    not rated as if its unseen depths were all sure to be accepted, which would send every
    step with a weak match to the widest verify."""
    total, reach = 1.0, 1.0
    deepest = len(accepted.reached) if accepted else 0  # every listed depth was reached
    for depth in range(length):
        n = a = 0
        if deepest:
            d = min(depth, deepest - 1)
            n, a = accepted.reached[d], accepted.accepted[d]  # type: ignore[union-attr]
        p = (a + 1) / (n + 2)
        reach *= min(1.0, p + z * math.sqrt(p * (1 - p) / (n + 2)))
        total += reach
    return total


class CombinedDraftRunner(SpeculativeDraftRunner):
    """A model drafter (``model``: EAGLE-3) and prompt lookup; the module docstring says how
    each step's proposal is chosen. Both follow every committed token."""

    branching = True

    def __init__(self, model: SpeculativeDraftRunner, lookup: PromptLookupDraftRunner) -> None:
        self.model = model
        self.lookup = lookup
        self.hidden_spec = model.hidden_spec
        self.widths: tuple[int, ...] = ()
        self.learned = _Learned()
        self._request: _Learned | None = None  # this request's, when seeded
        self._pending: _Pending | None = None
        self._fixed: StepCosts | None = None

    def check_target(self, target: TargetMetadata) -> None:
        self.model.check_target(target)
        self.widths = tuple(sorted(target.verify_widths))
        self._fixed = fixed_costs(self.widths)

    def check_shape(self, shape: TreeShape) -> None:
        self.model.check_shape(shape)

    def programs(self) -> tuple[Program, ...]:
        return self.model.programs()

    def memory(self) -> dict[str, int]:
        return self.model.memory()

    def step_costs(self, probe: CostProbe) -> DraftCosts:
        return self.model.step_costs(probe)

    def reset(self) -> None:
        self.model.reset()
        self.lookup.reset()
        self._pending = None

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        self._request = None
        self._pending = None
        self.lookup.prefill(prompt, first_token, None)
        return self.model.prefill(prompt, first_token, hidden)

    def accept(self, acceptance: Acceptance) -> int:
        self.lookup.accept(acceptance)
        return self.model.accept(acceptance)

    def _learned_for(self, sampler: Sampler) -> _Learned:
        if sampler.greedy or sampler.config.seed is None:
            return self.learned
        if self._request is None:
            self._request = _Learned()
        return self._request

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        learned = self._learned_for(sampler)
        widest = self.widths[-1] if self.widths else 1
        ngram, tokens = self.lookup.match(min(max_height, widest - 1))
        if tokens:
            z = math.sqrt(2 * math.log(max(learned.steps, 2)))
            model_rate = self._model_bound(learned, shape, z)
            best: tuple[float, int, int] | None = None  # (rate, length, width)
            for width in self.widths:
                length = min(len(tokens), width - 1)
                if length < 1 or (best is not None and length == best[1]):
                    continue  # the narrowest width that holds a length is its cheapest
                rate = self._lookup_bound(learned, ngram, length, width, z)
                if best is None or rate > best[0]:
                    best = (rate, length, width)
            # Ties (neither tried yet) go to the lookup: it costs no draft call.
            if best is not None and best[0] >= model_rate:
                _, length, width = best
                self._pending = _Pending(learned, f"lookup@{width}", shape, ngram, width)
                return Proposal.chain(tokens[:length], label=LOOKUP_LABEL)
        self._pending = _Pending(learned, shape.name, shape)
        return self.model.propose(shape, max_height, sampler)

    def _model_bound(self, learned: _Learned, shape: TreeShape, z: float) -> float:
        rec, seconds = learned.model.get(shape.name), learned.step_s(shape.name)
        if rec is None or not rec.steps or not seconds:
            return math.inf  # never run: try it
        return (rec.tokens / rec.steps + z * rec.stderr) / seconds

    def _lookup_bound(
        self, learned: _Learned, ngram: int, length: int, width: int, z: float
    ) -> float:
        seconds = learned.step_s(f"lookup@{width}")
        if seconds is None:
            # A width the lookup has not run yet: as fast as its fastest one (optimistic).
            seen = [s for a in learned.seconds if a.startswith("lookup@")
                    if (s := learned.step_s(a))]  # fmt: skip
            if not seen:
                return math.inf
            seconds = min(seen)
        return lookup_tokens(learned.lookup.get(ngram), length, z) / seconds

    def observe(self, step: StepOutcome) -> None:
        pending, self._pending = self._pending, None
        if pending is None:  # the step drafted nothing (the budget's last token)
            return
        learned = pending.learned
        seconds = step.seconds
        if learned is not self.learned:  # a seeded request: fixed prices, not wall time
            assert self._fixed is not None
            if pending.ngram:
                seconds = self._fixed.verify_s[pending.width]
            else:
                seconds = self._fixed.predict(pending.shape.cost, self.widths)
        learned.steps += 1
        learned.add_seconds(pending.arm, seconds)
        if pending.ngram:
            learned.lookup.setdefault(pending.ngram, DepthAcceptance()).observe(
                step.height, step.accepted
            )
        else:
            learned.model.setdefault(pending.arm, StepRecord()).add(step.emitted, seconds)


class CombinedMethod(DraftMethod):
    """An EAGLE-3 draft (``--draft``) and prompt lookup, the better one chosen each step."""

    name = COMBINED_METHOD
    help = "an EAGLE-3 draft (--draft) and prompt lookup, the better one each step"
    draft_program = True
    in_cpp = True

    def speculates(self, spec: RunnerSpec) -> bool:
        # The default method: without a draft, target-only (as EAGLE-3 without one).
        return spec.draft is not None

    def check(self, spec: RunnerSpec) -> None:
        if spec.option("draft_window") is not None and spec.draft is None:
            raise EtspecError(message("window_needs_draft"))

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        assert draft is not None
        lookup = PromptLookupDraftRunner(
            target.metadata.vocab_size, *PromptLookupMethod.ngram(spec)
        )
        return CombinedDraftRunner(Eagle3DraftRunner(draft, spec.option("draft_window")), lookup)
