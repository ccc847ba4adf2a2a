"""Eagle3DraftRunner: drafting with an EAGLE-3 head exported as a draft ``.pte``.

Draft row j pairs the target's state at position j with the token at position j + 1 and
predicts the token at j + 2 (the EAGLE alignment). Rows up to the committed target length
are "committed" draft KV at slot == position, computed from real target states. Drafting
(chain or tree, any ``TreeShape``) feeds nodes with the draft's own states into scratch
slots past the context, under the draft's tree mask; ``accept`` then writes the committed
rows of the accepted path from the target's states, so no draft-state row is ever
committed and rejected branches are simply never seen again.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from etspec.contract import (
    DRAFT_D2T,
    DRAFT_EXTEND,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    MASK_MIN,
    DraftMetadata,
    TargetMetadata,
)
from etspec.errors import EtspecError
from etspec.models.layers import causal_mask
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_runner import Acceptance, Proposal, SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape


class Eagle3DraftRunner(SpeculativeDraftRunner):
    branching = True

    def __init__(self, program: Program) -> None:
        meta = program.metadata
        if not isinstance(meta, DraftMetadata) or meta.draft_method != "eagle3":
            raise EtspecError("Eagle3DraftRunner needs an EAGLE-3 draft artifact")
        self.program = program
        self.meta = meta
        self.hidden_spec = meta.hidden_spec()
        (d2t,) = program.constant(DRAFT_D2T)
        d2t = torch.as_tensor(d2t, dtype=torch.long)
        # Draft id i is target id i + d2t[i].
        self.target_ids = torch.arange(meta.draft_vocab_size) + d2t
        self._scratch_slots = meta.max_context + torch.arange(self.scratch)
        self._extend_rows = torch.arange(meta.extend_width)
        self._logits = torch.empty(0)
        self._hidden = torch.empty(0)
        self._pos = 0

    def check_target(self, target: TargetMetadata) -> None:
        if target.vocab_size != self.meta.target_vocab_size:
            raise EtspecError(
                f"the draft predicts a {self.meta.target_vocab_size}-token vocabulary, the "
                f"target has {target.vocab_size}; export the draft against this target"
            )

    def memory(self) -> dict[str, int]:
        return {
            "draft_weights_bytes": self.program.weights_bytes(),
            "draft_kv_bytes": self.meta.kv_cache_bytes,
        }

    def reset(self) -> None:
        self.program.run(DRAFT_RESET)
        self._pos = 0

    def _causal(self, positions: torch.Tensor) -> torch.Tensor:
        return causal_mask(positions, self.meta.cache_size, MASK_MIN)

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        assert hidden is not None
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
                DRAFT_PREFILL, ids, states, positions, torch.tensor([real - 1])
            )
            calls += 1
        self._logits, self._hidden, self._pos = logits, out, total
        return calls

    @property
    def scratch(self) -> int:
        """Draft cache slots past the context, where tree nodes are fed."""
        return self.meta.cache_size - self.meta.max_context

    def check_shape(self, shape: TreeShape) -> None:
        # Fed nodes take scratch slots, and a call's pad rows the slots after them.
        need = shape.cost.fed_nodes + self.meta.step_width
        if need > self.scratch:
            raise EtspecError(
                f"tree {shape} feeds {shape.cost.fed_nodes} draft nodes per step, the draft "
                f"artifact has {self.scratch} scratch slots (step width "
                f"{self.meta.step_width}); use a smaller tree or re-export the draft with "
                f"--scratch {need}"
            )

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        return shape.grow(_Expansion(self), max_height, sampler)

    def accept(self, acceptance: Acceptance) -> int:
        hidden = acceptance.hidden
        assert hidden is not None
        e, rows = self.meta.extend_width, len(acceptance.tokens)
        ids = torch.zeros(e, dtype=torch.long)
        ids[:rows] = torch.tensor([*acceptance.tokens[1:], acceptance.next_token])
        states = torch.zeros(e, hidden.shape[-1])
        states[:rows] = hidden
        positions = acceptance.position + self._extend_rows
        logits, out = self.program.run(
            DRAFT_EXTEND, ids, states, positions, positions, self._causal(positions)
        )
        self._logits, self._hidden = logits[rows - 1 : rows], out[rows - 1 : rows]
        self._pos = acceptance.position + rows
        return 1


class _Expansion:
    """One proposal's tree growth in the draft cache (an ``Expander``).

    Handle 0 is the root: its children's logits and the state they are fed with come from
    the last prefill/accept. A fed node at depth d pairs its token with its parent's output
    state at position ``committed + d - 1`` (the EAGLE alignment), is written to the next
    free scratch slot, and sees the committed slots, its fed ancestors' slots and its own.
    Scratch is free again at the next proposal: ``accept`` rewrites the committed rows of
    the accepted path from the target's states (``draft_extend``), which is the draft's
    KV commit, fused into the call that also yields the next root.
    """

    def __init__(self, runner: Eagle3DraftRunner) -> None:
        self.runner = runner
        self.target_ids = runner.target_ids
        self.vocab_size = runner.meta.target_vocab_size
        self.calls = 0
        self._states = [runner._hidden[0]]  # output state of each handle
        self._depth = [0]
        self._seen: list[list[int]] = [[]]  # scratch slots each handle's children see

    def root(self) -> torch.Tensor:
        return self.runner._logits[0]

    def expand(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        r = self.runner
        w, pos = r.meta.step_width, r._pos
        out = []
        for lo in range(0, len(parents), w):
            par = list(parents[lo : lo + w])
            n = len(par)
            first = len(self._states) - 1  # scratch index of this call's first node
            if first + w > r.scratch:
                raise EtspecError(f"tree needs more than the draft's {r.scratch} scratch slots")
            slots = r._scratch_slots[first : first + w]
            ids = torch.zeros(w, dtype=torch.long)
            ids[:n] = torch.tensor(tokens[lo : lo + n], dtype=torch.long)
            states = torch.zeros(w, self._states[0].shape[-1])
            states[:n] = torch.stack([self._states[p] for p in par])
            positions = torch.full((w,), pos, dtype=torch.long)
            positions[:n] += torch.tensor([self._depth[p] for p in par])
            mask = torch.full((w, r.meta.cache_size), MASK_MIN)
            mask[:n, :pos] = 0.0
            mask[torch.arange(w), slots] = 0.0  # every row sees itself (pad rows: only that)
            for i, p in enumerate(par):
                if self._seen[p]:
                    mask[i, self._seen[p]] = 0.0
            logits, hidden = r.program.run(DRAFT_STEP, ids, states, positions, slots, mask)
            self.calls += 1
            for i, p in enumerate(par):
                self._states.append(hidden[i])
                self._depth.append(self._depth[p] + 1)
                self._seen.append([*self._seen[p], int(slots[i])])
            out.append(logits[:n])
        return torch.cat(out)
