"""CombinedDraftRunner: an EAGLE-3 draft and prompt lookup, chosen step by step.

Prompt lookup proposes, with no model call, what followed the latest earlier occurrence of
the last n tokens: it wins where the text repeats (code edits, quotes, a base model's loops)
and proposes nothing, or little of use, where it does not. The EAGLE-3 draft predicts text
that was never seen, at one draft call per tree level. This runner holds both and keeps both
in step with every committed token; each step it offers the lookup's match (``offer``) and
grows the model's shape when asked (``propose``). Which one runs, and how much of the match
is worth a verify, is the dispatcher's choice (``dispatcher.Dispatcher``), made with the
same costs and optimism as every other choice it makes.

Choosing a proposal from the past alone keeps decoding lossless: the verifier checks
whatever is proposed (a lookup token as a point mass, a draft token against the draft's
distribution, or either against the target's race when coupled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from etspec.contract import COMBINED_METHOD, TargetMetadata, message
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner, PromptLookupMethod
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import Acceptance, DraftCosts, Offer, Proposal

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec
    from etspec.runtime.speculative.step import CostProbe


class CombinedDraftRunner(SpeculativeDraftRunner):
    """A model drafter (``model``: EAGLE-3) and prompt lookup; both follow every committed
    token."""

    offers = True

    def __init__(self, model: SpeculativeDraftRunner, lookup: PromptLookupDraftRunner) -> None:
        self.model = model
        self.lookup = lookup
        self.hidden_spec = model.hidden_spec
        self.branching = model.branching

    def check_target(self, target: TargetMetadata) -> None:
        self.model.check_target(target)

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

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        self.lookup.prefill(prompt, first_token, None)
        return self.model.prefill(prompt, first_token, hidden)

    def accept(self, acceptance: Acceptance) -> int:
        self.lookup.accept(acceptance)
        return self.model.accept(acceptance)

    def offer(self, max_tokens: int) -> Offer | None:
        return self.lookup.offer(max_tokens)

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        return self.model.propose(shape, max_height, sampler)


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
