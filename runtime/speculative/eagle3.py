"""Eagle3DraftRunner: drafting with an EAGLE-3 head exported as a draft ``.pte``.

Draft row j pairs the target's state at position j with the token at position j + 1 and
predicts the token at j + 2 (the EAGLE alignment). Rows up to the committed target length
are "committed" draft KV at slot == position, computed from real target states. Drafting
(chain or tree, any ``TreeShape``) feeds nodes with the draft's own states into scratch
slots past the context, under the draft's tree mask; ``accept`` then writes the committed
rows of the accepted path from the target's states, so no draft-state row is ever
committed and rejected branches are simply never seen again.

``window`` truncates what the draft attends to: a query at position p sees only positions
p - window + 1 .. p (EAGLE-Pangu's drafter-only fixed-window ablation, its Table 3). The
target and its verification are untouched, so output stays exact; only acceptance changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from etspec.contract import (
    DRAFT_D2T,
    DRAFT_KV_BYTES,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    DRAFT_WEIGHTS_BYTES,
    EAGLE3,
    MASK_MIN,
    DraftMetadata,
    TargetMetadata,
    message,
)
from etspec.errors import ArtifactError, EtspecError
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import (
    Acceptance,
    DraftCosts,
    Proposal,
    SpeculativeDraftRunner,
)
from etspec.runtime.speculative.shapes import TreeShape

if TYPE_CHECKING:
    from etspec.runtime.loading import RunnerSpec
    from etspec.runtime.speculative.costs import CostProbe


@dataclass(frozen=True)
class DraftGeometry:
    """What is fixed per draft program and window: where tree nodes go (the scratch slots
    past the context) and how a row's mask is cut (``window``)."""

    meta: DraftMetadata
    layout: MaskLayout
    window: int | None
    scratch_slots: torch.Tensor  # [scratch] the slots tree nodes are fed into
    extend_rows: torch.Tensor  # arange(extend_width)
    step_rows: torch.Tensor  # arange(step_width)
    positions: torch.Tensor  # arange(cache_size + extend_width): slices are positions
    # step_slots[f]: the scratch slots of a draft step whose first node takes scratch slot f
    step_slots: tuple[torch.Tensor, ...]

    @classmethod
    def of(cls, meta: DraftMetadata, window: int | None) -> DraftGeometry:
        scratch = meta.cache_size - meta.max_context
        return cls(
            meta,
            MaskLayout(meta.max_context, meta.cache_size),  # a draft has no sliding layers
            window,
            meta.max_context + torch.arange(scratch),
            torch.arange(meta.extend_width),
            torch.arange(meta.step_width),
            torch.arange(meta.cache_size + meta.extend_width),
            tuple(
                meta.max_context + torch.arange(f, f + meta.step_width)
                for f in range(max(scratch - meta.step_width + 1, 0))
            ),
        )

    @property
    def scratch(self) -> int:
        """Draft cache slots past the context, where tree nodes are fed."""
        return len(self.scratch_slots)

    def causal_rows(self, start: int, rows: int) -> torch.Tensor:
        """``causal(arange(start, start + rows))``, built in a few ops."""
        mask = self.layout.causal_rows(start, rows)
        return mask if self.window is None else self.truncate(mask, self.positions[start:][:rows])

    def causal(self, positions: torch.Tensor) -> torch.Tensor:
        mask = self.layout.causal(positions)
        return mask if self.window is None else self.truncate(mask, positions)

    def truncate(self, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Hide committed slots more than ``window - 1`` positions behind each row."""
        if self.window is None:
            return mask
        n = self.layout.committed(mask.shape[1])
        cut = positions - self.window + 1
        old = torch.arange(n)[None, :] < cut[:, None]
        mask[:, :n].masked_fill_(old, MASK_MIN)
        return mask


@dataclass(frozen=True)
class DraftRoot:
    """What the last prefill or accept left for the next proposal: the logits of the root's
    children [1, Vd] and the draft state they are fed with [1, H], at committed length
    ``position``."""

    logits: torch.Tensor
    state: torch.Tensor
    position: int


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
        (d2t,) = program.constant(DRAFT_D2T)
        d2t = torch.as_tensor(d2t, dtype=torch.long)
        if d2t.shape != (meta.draft_vocab_size,):
            raise ArtifactError(message("d2t_size", path=program.source))
        # Draft id i is target id i + d2t[i].
        self.target_ids = torch.arange(meta.draft_vocab_size) + d2t
        self.target_id_of = self.target_ids.tolist()
        if len(self.target_ids) and not (
            int(self.target_ids.min()) >= 0 and int(self.target_ids.max()) < meta.target_vocab_size
        ):
            raise ArtifactError(message("d2t_range", path=program.source))
        self.geometry = DraftGeometry.of(meta, window)
        self.root = DraftRoot(torch.empty(0), torch.empty(0), 0)

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

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        assert hidden is not None
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

    def expansion(self) -> _Expansion:
        """A fresh ``Expander`` over the draft from the current root (one proposal's)."""
        return _Expansion(
            self.program, self.geometry, self.root, self.target_ids, self.target_id_of
        )

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        return shape.grow(self.expansion(), max_height, sampler)

    def accept(self, acceptance: Acceptance) -> int:
        hidden = acceptance.hidden
        assert hidden is not None
        geo = self.geometry
        rows = len(acceptance.tokens)
        e = self.meta.extend_width_for(rows)  # the narrowest extend that holds them
        ids = torch.tensor([*acceptance.tokens[1:], acceptance.next_token] + [0] * (e - rows))
        states = hidden
        if rows < e:
            states = torch.zeros(e, hidden.shape[-1])
            states[:rows] = hidden
        start = acceptance.position
        positions = geo.positions[start : start + e]
        mask = geo.causal_rows(start, e)
        logits, out = self.program.run(
            self.meta.extend_method(e), ids, states, positions, positions, mask
        )
        self.root = DraftRoot(
            logits[rows - 1 : rows], out[rows - 1 : rows], acceptance.position + rows
        )
        return 1


class _Expansion:
    """One proposal's tree growth in the draft cache (an ``Expander``).

    Handle 0 is the root: its children's logits and the state they are fed with come from
    the last prefill/accept (``DraftRoot``). A fed node at depth d pairs its token with its
    parent's output state at position ``committed + d - 1`` (the EAGLE alignment), is
    written to the next free scratch slot, and sees the committed slots, its fed ancestors'
    slots and its own. Scratch is free again at the next proposal: ``accept`` rewrites the
    committed rows of the accepted path from the target's states (``draft_extend``), which
    is the draft's KV commit, fused into the call that also yields the next root.

    Per handle it keeps the output state and the scratch columns of its mask row (its
    ancestors' slots and its own), so a call's inputs are a few gathers, not loops.
    """

    def __init__(
        self,
        program: Program,
        geometry: DraftGeometry,
        root: DraftRoot,
        target_ids: torch.Tensor,
        target_id_of: list[int],
    ) -> None:
        self.program = program
        self.geometry = geometry
        self.root_logits = root.logits[0]
        self.position = root.position
        self.target_ids = target_ids
        self.target_id_of = target_id_of
        self.vocab_size = geometry.meta.target_vocab_size
        self.calls = 0
        self._fed = 0  # handles fed so far (handle h > 0 sits in scratch slot h - 1)
        self._depth = [0]
        scratch = geometry.scratch
        handles = scratch + 1
        self._states = torch.empty(handles, root.state.shape[-1])
        self._states[0] = root.state[0]
        # Scratch columns each handle's children see (the handle's ancestors and itself).
        self._seen = torch.full((handles, scratch), MASK_MIN)
        width = geometry.layout.width(root.position)
        self._committed_cols = geometry.layout.committed(width)
        self._mask = torch.full((geometry.meta.step_width, width), MASK_MIN)
        self._mask[:, : root.position] = 0.0  # the committed prefix, the same for every call
        # A chain in progress: the links fed since the last level call, each the child of
        # the one before (``_link``), and the mask and output states of the last one.
        self._line: list[tuple[int, torch.Tensor]] = []  # (handle, its call's states)
        self._line_io: tuple[torch.Tensor, torch.Tensor] | None = None

    def root(self) -> torch.Tensor:
        return self.root_logits

    def expand(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        if len(parents) == 1 and parents[0] == self._fed and self.geometry.window is None:
            return self._link(parents[0], tokens[0])
        self._settle_line()
        return self._level(parents, tokens)

    def _link(self, parent: int, token: int) -> torch.Tensor:
        """Feed one node whose parent is the last node fed (or the root, before any): a
        chain's next link. Every row of the call sees the same columns (committed prefix,
        the chain's slots so far, and the new node's own), so the mask grows by one column
        instead of being rebuilt, and the parent's state is row 0 of the last call's
        output, passed back as it is; the pad rows' inputs are finite and their outputs
        and slots are never read (the next link overwrites the slots first). The per-handle
        tables a level call reads are filled only if one follows (``_settle_line``)."""
        geo = self.geometry
        w, first, ctx = geo.meta.step_width, self._fed, self._committed_cols
        if first + w > geo.scratch:
            raise EtspecError(message("scratch_exhausted", scratch=geo.scratch))
        if self._line_io is None:
            mask = self._mask.clone()
            mask[:, ctx:] = self._seen[parent]  # the parent's ancestors
            states = self._states[parent].expand(w, -1).contiguous()
        else:
            mask, states = self._line_io
        mask[:, ctx + first] = 0.0  # every row sees the new node's slot
        depth = self._depth[parent]
        logits, hidden = self.program.run(
            DRAFT_STEP,
            torch.tensor([token] + [0] * (w - 1)),
            states,
            torch.full((w,), self.position + depth),
            geo.step_slots[first],
            mask,
        )
        self.calls += 1
        self._fed += 1
        self._depth.append(depth + 1)
        self._line.append((self._fed, hidden))
        self._line_io = (mask, hidden)
        return logits[:1]

    def _settle_line(self) -> None:
        """Write the chain's links into the per-handle tables (output state; mask columns:
        the first link's parent's, then one more slot per link)."""
        if not self._line:
            return
        first = self._line[0][0]
        seen = self._seen[first - 1].clone()  # a line starts from the node fed before it
        for handle, hidden in self._line:
            self._states[handle] = hidden[0]
            seen[handle - 1] = 0.0  # handle h sits in scratch slot h - 1
            self._seen[handle] = seen
        self._line, self._line_io = [], None

    def _level(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        """Feed any nodes (a tree level): each row's mask is its parent's columns plus
        its own slot, its state its parent's output state."""
        geo = self.geometry
        w, pos, ctx, scratch = geo.meta.step_width, self.position, self._committed_cols, geo.scratch
        rows = geo.step_rows
        out = []
        for lo in range(0, len(parents), w):
            par = list(parents[lo : lo + w])
            n = len(par)
            first = self._fed  # scratch index of this call's first node
            if first + w > scratch:
                raise EtspecError(message("scratch_exhausted", scratch=scratch))
            slots = geo.scratch_slots[first : first + w]
            # Pad rows copy the root: finite inputs, outputs never read, slots never seen.
            pad = [0] * (w - n)
            index = torch.tensor(par + pad)
            ids = torch.tensor([*tokens[lo : lo + n], *pad], dtype=torch.long)
            positions = torch.tensor([pos + self._depth[p] for p in par] + [pos] * (w - n))
            mask = geo.truncate(self._mask.clone(), positions)
            mask[:, ctx:] = self._seen.index_select(0, index)
            mask[rows, ctx + first + rows] = 0.0  # every row sees itself
            logits, hidden = self.program.run(
                DRAFT_STEP, ids, self._states.index_select(0, index), positions, slots, mask
            )
            self.calls += 1
            self._states[first + 1 : first + 1 + n] = hidden[:n]
            self._seen[first + 1 : first + 1 + n] = mask[:n, ctx:]
            self._depth.extend(self._depth[p] + 1 for p in par)
            self._fed += n
            out.append(logits[:n])
        return out[0] if len(out) == 1 else torch.cat(out)


class Eagle3Method(DraftMethod):
    """An EAGLE-3 draft program of its own (``--draft``), fed the target's hidden states."""

    name = EAGLE3
    help = "an EAGLE-3 draft (--draft)"
    draft_program = True
    options = frozenset({"draft_window"})

    def speculates(self, spec: RunnerSpec) -> bool:
        return spec.draft is not None

    def check(self, spec: RunnerSpec) -> None:
        if spec.draft_window is not None and spec.draft is None:
            raise EtspecError(message("window_needs_draft"))

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        assert draft is not None
        return Eagle3DraftRunner(draft, spec.draft_window)

    def cpp_args(self, spec: RunnerSpec) -> list[str] | None:
        window = [] if spec.draft_window is None else ["--draft-window", str(spec.draft_window)]
        return ["--draft", str(spec.draft), *window]
