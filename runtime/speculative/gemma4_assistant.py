"""Gemma4AssistantDraftRunner: drafting with Gemma 4's assistant, exported into the target.

The assistant keeps no KV: every call (``assistant_step``) reads the target's committed
caches, so committing and rolling back are the target's business alone, and the runner's
whole state is the next token, the state it is fed with and the committed length. A
proposal at committed length ``c`` starts from the emitted token at position ``c`` and the
target's final normed state at ``c - 1``; each node is the pick of its parent's logits, fed
with its parent's output state at the same position ``c``. Nodes never see each other, so a
tree level is one call of independent rows (padded to the compiled step width).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from etspec.contract import (
    ASSISTANT_STEP,
    DRAFT_KV_BYTES,
    GEMMA4_ASSISTANT,
    GEMMA4_ASSISTANT_METHOD,
    HiddenStateSpec,
    TargetMetadata,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import Acceptance, DraftCosts, Proposal

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec
    from etspec.runtime.speculative.step import CostProbe


class Gemma4AssistantDraftRunner(SpeculativeDraftRunner):
    branching = True

    def __init__(self, program: Program) -> None:
        meta = program.metadata
        if not isinstance(meta, TargetMetadata) or meta.assistant != GEMMA4_ASSISTANT:
            raise EtspecError(message("no_assistant"))
        self.program = program
        self.meta = meta
        self.width = meta.assistant_step_width
        self.hidden_spec = HiddenStateSpec("final_norm", (meta.num_layers,))
        self._token = 0
        self._state = torch.empty(0)
        self._pos = 0

    def reset(self) -> None:
        self._pos = 0

    def programs(self) -> tuple[Program, ...]:
        return (self.program,)

    def memory(self) -> dict[str, int]:
        return {DRAFT_KV_BYTES: 0}

    def step_costs(self, probe: CostProbe) -> DraftCosts:
        # One call per level, plus the proposal's root call (it stands where an EAGLE-3
        # draft's extend does).
        w, meta = self.width, self.meta
        seconds = probe.timed(
            self.program,
            ASSISTANT_STEP,
            torch.zeros(w, dtype=torch.long),
            torch.zeros(w, meta.hidden_size),
            torch.tensor([1]),
        )
        return DraftCosts(w, seconds, seconds)

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        assert hidden is not None
        self._token, self._state, self._pos = first_token, hidden[-1], len(prompt)
        return 0

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        step = _AssistantStep(self.program, self.width, self._pos)
        expansion = _AssistantExpansion(step, self._token, self._state, self.meta.vocab_size)
        return shape.grow(expansion, max_height, sampler)

    def accept(self, acceptance: Acceptance) -> int:
        assert acceptance.hidden is not None
        self._token = acceptance.next_token
        self._state = acceptance.hidden[-1]
        self._pos = acceptance.position + len(acceptance.tokens)
        return 0


@dataclass(frozen=True)
class _AssistantStep:
    """``assistant_step`` calls of one proposal: every node sits at the committed length
    ``position`` (the assistant attends the target's caches, not a cache of its own)."""

    program: Program
    width: int
    position: int

    def calls(self, rows: int) -> int:
        return -(-rows // self.width)

    def __call__(
        self, tokens: Sequence[int], states: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and output states of ``tokens`` fed with ``states``, in step-width calls."""
        w, n = self.width, len(tokens)
        position = torch.tensor([self.position])
        logits, outs = [], []
        for lo in range(0, n, w):
            rows = min(w, n - lo)
            ids = torch.zeros(w, dtype=torch.long)
            ids[:rows] = torch.tensor(tokens[lo : lo + rows])
            fed = torch.zeros(w, states.shape[-1])
            fed[:rows] = states[lo : lo + rows]
            lg, out = self.program.run(ASSISTANT_STEP, ids, fed, position)
            logits.append(lg[:rows])
            outs.append(out[:rows])
        return torch.cat(logits), torch.cat(outs)


class _AssistantExpansion:
    """One proposal's tree growth (an ``Expander``): handle 0 is the root, fed with the
    emitted token and the target's state; handle h > 0 is the h-th expanded node."""

    def __init__(self, step: _AssistantStep, token: int, state: torch.Tensor, vocab: int) -> None:
        self.step = step
        self.vocab_size = vocab
        self.target_ids = torch.arange(self.vocab_size)
        self.target_id_of = range(self.vocab_size)  # one vocabulary: the identity
        self.position = step.position
        logits, out = step([token], state[None])
        self.calls = 1
        self._root = logits[0]
        self._states = [out[0]]

    def root(self) -> torch.Tensor:
        return self._root

    def expand(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        states = torch.stack([self._states[p] for p in parents])
        logits, out = self.step(tokens, states)
        self.calls += self.step.calls(len(tokens))
        self._states.extend(out)
        return logits


class Gemma4AssistantMethod(DraftMethod):
    """The Gemma 4 assistant exported into the target (``export target --assistant``); in
    reference mode ``--draft`` is the assistant's checkpoint folder."""

    name = GEMMA4_ASSISTANT_METHOD
    help = (
        "the Gemma 4 assistant exported into the target (with --reference, --draft is the "
        "assistant's checkpoint folder)"
    )
    in_cpp = True

    def check(self, spec: RunnerSpec) -> None:
        if not spec.reference and spec.draft is not None:
            raise EtspecError(message("assistant_with_draft"))
        if spec.reference and spec.draft is None:
            raise EtspecError(
                "--draft-method gemma4-assistant with --reference needs --draft ASSISTANT_DIR"
            )

    def eager_target_options(self, spec: RunnerSpec) -> dict[str, Any]:
        return {"assistant": spec.draft}

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        return Gemma4AssistantDraftRunner(target)
