"""Eagle3DraftRunner: drafting with an EAGLE-3 head exported as a draft ``.pte``.

Draft row j pairs the target's state at position j with the token at position j + 1 and
predicts the token at j + 2 (the EAGLE alignment). Rows up to the committed target length
are "committed" draft KV at slot == position, computed from real target states. Drafting
(chain or tree, any ``TreeShape``) feeds nodes with the draft's own states into scratch
slots past the context, under the draft's tree mask; ``accept`` then writes the committed
rows of the accepted path from the target's states, so no draft-state row is ever
committed and rejected branches are simply never seen again. ``accept`` only queues them: the
draft catches up in one call when it next proposes, so a step that drafts nothing (``--tree
auto``'s decode) or that prompt lookup proposed (``combined.py``) costs no draft call.

``window`` truncates what the draft attends to: a query at position p sees only positions
p - window + 1 .. p (EAGLE-Pangu's drafter-only fixed-window ablation, its Table 3). The
target and its verification are untouched, so output stays exact; only acceptance changes.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from etspec.artifact import draft_target_ids
from etspec.contract import (
    DRAFT_D2T,
    DRAFT_KV_BYTES,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    DRAFT_WEIGHTS_BYTES,
    EAGLE3,
    DraftMetadata,
    TargetMetadata,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.eagle3_expansion import DraftGeometry, DraftRoot, Eagle3Expansion
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import Acceptance, DraftCosts, Proposal

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec
    from etspec.runtime.speculative.step import CostProbe


class Eagle3DraftRunner(SpeculativeDraftRunner):
    branching = True

    def __init__(self, program: Program, window: int | None = None) -> None:
        meta = program.metadata
        if not isinstance(meta, DraftMetadata) or meta.draft_method != EAGLE3:
            raise EtspecError("Eagle3DraftRunner needs an EAGLE-3 draft artifact")
        if window is not None and window < 1:
            raise EtspecError(message("draft_window", value=window))
        self.program = program
        self.meta = meta
        self.window = window
        self.hidden_spec = meta.hidden_spec()
        self.target_ids = draft_target_ids(program.constant(DRAFT_D2T)[0], meta, program.source)
        self.target_id_of = self.target_ids.tolist()
        self.geometry = DraftGeometry.of(meta, window)
        self.root = DraftRoot(torch.empty(0), torch.empty(0), 0)
        self.behind: list[Acceptance] = []  # committed, not yet fed to the draft
        # The prompt not yet fed (prompt, first token, its target states): ``prefill`` queues.
        self._prompt: tuple[list[int], int, torch.Tensor] | None = None

    def check_target(self, target: TargetMetadata) -> None:
        if target.vocab_size != self.meta.target_vocab_size:
            raise EtspecError(
                f"the draft predicts a {self.meta.target_vocab_size}-token vocabulary, the "
                f"target has {target.vocab_size}; export the draft against this target"
            )

    def programs(self) -> tuple[Program, ...]:
        return (self.program,)

    def memory(self) -> dict[str, int]:
        return {
            DRAFT_WEIGHTS_BYTES: self.program.weights_bytes(),
            DRAFT_KV_BYTES: self.meta.kv_cache_bytes,
        }

    def step_costs(self, probe: CostProbe) -> DraftCosts:
        dm, layout = self.meta, self.geometry.layout
        tok, pos, slots, mask = probe.scratch_inputs(dm.step_width, layout)
        step_s = probe.timed(
            self.program, DRAFT_STEP, tok, torch.zeros(dm.step_width, dm.hidden_size), pos,
            slots, mask,
        )  # fmt: skip
        # Every width runs once here, so no method is first loaded inside a timed step;
        # most steps accept a few tokens, so the narrowest extend is the typical cost.
        width = dm.target_hidden_size * len(dm.hidden_state_layers)
        extend_s = 0.0
        for e in reversed(dm.extend_widths):  # the narrowest last: its time is kept
            tok, pos, slots, mask = probe.scratch_inputs(e, layout)
            extend_s = probe.timed(
                self.program, dm.extend_method(e), tok, torch.zeros(e, width), pos, slots, mask
            )
        return DraftCosts(dm.step_width, step_s, extend_s)

    def reset(self) -> None:
        self.program.run(DRAFT_RESET)
        self.root = DraftRoot(torch.empty(0), torch.empty(0), 0)
        self.behind = []
        self._prompt = None

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        # Queued, not run: the first proposal runs it (``catch_up``), so a request whose
        # steps never draft (a draft that does not pay here) costs no draft call at all.
        assert hidden is not None
        self.behind = []
        self._prompt = (prompt, first_token, hidden[: len(prompt)].clone())
        return 0

    def _prefill(self) -> int:
        """Run the queued prefill; returns the calls made."""
        assert self._prompt is not None
        prompt, first_token, hidden = self._prompt
        self._prompt = None
        geo = self.geometry
        tokens = torch.tensor([*prompt[1:], first_token], dtype=torch.long)
        n, total = self.meta.prefill_chunk, len(prompt)
        calls = 0
        for lo in range(0, total, n):
            real = min(n, total - lo)
            ids = torch.zeros(n, dtype=torch.long)
            ids[:real] = tokens[lo : lo + real]
            states = torch.zeros(n, hidden.shape[-1])
            states[:real] = hidden[lo : lo + real]
            positions = torch.arange(lo, lo + n)
            logits, out = self.program.run(
                DRAFT_PREFILL,
                ids,
                states,
                positions,
                torch.tensor([real - 1]),
                geo.layout.causal(positions),
            )
            calls += 1
        self.root = DraftRoot(logits, out, total)
        if self.window is not None and total > self.window:
            # The prefill's own mask is full-causal; recompute the last row (the first
            # proposal's root) under the window. Its K/V row depends only on its inputs (one
            # draft layer), so rewriting it leaves the cache as it was.
            e = self.meta.extend_width_for(1)
            ids = torch.zeros(e, dtype=torch.long)
            ids[0] = tokens[-1]
            states = torch.zeros(e, hidden.shape[-1])
            states[0] = hidden[total - 1]
            positions = total - 1 + geo.extend_rows[:e]
            logits, out = self.program.run(
                self.meta.extend_method(e), ids, states, positions, positions, geo.causal(positions)
            )
            self.root = DraftRoot(logits[:1], out[:1], total)
            calls += 1
        return calls

    @property
    def scratch(self) -> int:
        """Draft cache slots past the context, where tree nodes are fed."""
        return self.geometry.scratch

    def check_shape(self, shape: TreeShape) -> None:
        # Fed nodes take scratch slots, and a call's pad rows the slots after them.
        need = shape.cost.fed_nodes + self.meta.step_width
        if need > self.scratch:
            raise EtspecError(
                message(
                    "draft_scratch",
                    name=shape.name,
                    fed=shape.cost.fed_nodes,
                    scratch=self.scratch,
                    step_width=self.meta.step_width,
                    need=need,
                )
            )

    def expansion(self) -> Eagle3Expansion:
        """A fresh ``Expander`` over the draft from the current root (one proposal's), the
        queued prefill and acceptances fed first."""
        self.catch_up()
        return Eagle3Expansion(
            self.program, self.geometry, self.root, self.target_ids, self.target_id_of
        )

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        if not shape.cost.max_nodes:  # a decode: the draft stays behind
            return Proposal([], [])
        t0 = time.perf_counter()
        calls = self.catch_up()
        extend_s = time.perf_counter() - t0
        proposal = shape.grow(self.expansion(), max_height, sampler)
        if not calls:
            return proposal
        return replace(
            proposal, calls=proposal.calls + calls, extend_calls=calls, extend_s=extend_s
        )

    def accept(self, acceptance: Acceptance) -> int:
        assert acceptance.hidden is not None
        # The rows are views of the verify's output, which the next call may overwrite.
        a = acceptance
        self.behind.append(
            Acceptance(a.position, a.tokens, a.nodes, a.next_token, a.hidden.clone())
        )
        return 0

    def catch_up(self) -> int:
        """Run the queued prefill, then feed the queued acceptances to the draft, as few
        extend calls as hold them; returns the calls made."""
        calls = self._prefill() if self._prompt is not None else 0
        if not self.behind:
            return calls
        first, last = self.behind[0], self.behind[-1]
        tokens = [t for a in self.behind for t in a.tokens]
        hidden = torch.cat([a.hidden for a in self.behind])  # type: ignore[misc]
        self.behind = []
        widest = max(self.meta.extend_widths)
        for lo in range(0, len(tokens), widest):
            hi = min(lo + widest, len(tokens))
            nxt = tokens[hi] if hi < len(tokens) else last.next_token
            self._extend(first.position + lo, tokens[lo:hi], nxt, hidden[lo:hi])
        return calls + math.ceil(len(tokens) / widest)

    def _extend(self, start: int, tokens: list[int], next_token: int, hidden: torch.Tensor) -> None:
        """Write committed rows ``start..`` (``tokens``, each paired with the token after
        it, ``next_token`` for the last) from the target's states; the last row's output is
        the next root."""
        geo = self.geometry
        rows = len(tokens)
        e = self.meta.extend_width_for(rows)  # the narrowest extend that holds them
        ids_np = np.zeros(e, dtype=np.int64)  # numpy: no torch op per step (kv_cache)
        ids_np[: rows - 1] = tokens[1:]
        ids_np[rows - 1] = next_token
        states = hidden
        if rows < e:
            states = torch.zeros(e, hidden.shape[-1])
            states[:rows] = hidden
        positions = geo.positions[start : start + e]
        mask = geo.causal_rows(start, e)
        logits, out = self.program.run(
            self.meta.extend_method(e), torch.from_numpy(ids_np), states, positions, positions,
            mask,
        )  # fmt: skip
        self.root = DraftRoot(logits[rows - 1 : rows], out[rows - 1 : rows], start + rows)


class Eagle3Method(DraftMethod):
    """An EAGLE-3 draft program of its own (``--draft``), fed the target's hidden states."""

    name = EAGLE3
    help = "an EAGLE-3 draft (--draft)"
    draft_program = True
    in_cpp = True

    def speculates(self, spec: RunnerSpec) -> bool:
        return spec.draft is not None

    def check(self, spec: RunnerSpec) -> None:
        if spec.option("draft_window") is not None and spec.draft is None:
            raise EtspecError(message("window_needs_draft"))

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        assert draft is not None
        return Eagle3DraftRunner(draft, spec.option("draft_window"))
