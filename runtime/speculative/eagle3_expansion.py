"""How an EAGLE-3 draft grows one proposal in its cache: where tree nodes go
(``DraftGeometry``), what the last prefill or accept left (``DraftRoot``), and the growth
itself (``Eagle3Expansion``, the ``Expander`` every tree shape drives)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from etspec.contract import DRAFT_STEP, MASK_MIN, DraftMetadata, message
from etspec.errors import EtspecError
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program


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

    @functools.cached_property
    def scratch(self) -> int:
        """Draft cache slots past the context, where tree nodes are fed (read once: every
        link checks it, and ``len`` of a tensor is a few microseconds)."""
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


class Eagle3Expansion:
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
        self._root_state = root.state
        # Per handle: output state, and the scratch columns its children see (its ancestors
        # and itself). Made by the first tree level (``_tables``): a chain from the root
        # never reads them.
        self._states = torch.empty(0)
        self._seen = torch.empty(0)
        width = geometry.layout.width(root.position)
        self._committed_cols = geometry.layout.committed(width)
        w = geometry.meta.step_width
        # Host-side arrays are built in numpy and handed over with ``torch.from_numpy`` (no
        # copy): a numpy op costs ~1 us, a torch op 5-15 us right after a program call.
        mask = np.full((w, width), MASK_MIN, dtype=np.float32)
        mask[:, : root.position] = 0.0  # the committed prefix, the same for every call
        self._mask = torch.from_numpy(mask)
        # A chain in progress: the links fed since the last level call, each the child of
        # the one before (``_link``), and the mask and output states of the last one.
        self._line: list[tuple[int, torch.Tensor]] = []  # (handle, its call's states)
        self._line_io: tuple[torch.Tensor, torch.Tensor] | None = None
        # A link's token, position and mask inputs, written through numpy views.
        self._link_ids_np = np.zeros(w, dtype=np.int64)
        self._link_positions_np = np.empty(w, dtype=np.int64)
        self._link_ids = torch.from_numpy(self._link_ids_np)
        self._link_positions = torch.from_numpy(self._link_positions_np)
        self._link_mask_np = mask  # rebound to each line's own mask

    def _tables(self) -> None:
        """Make the per-handle tables a tree level reads (once per proposal)."""
        if self._states.numel():
            return
        handles = self.geometry.scratch + 1
        self._states = torch.empty(handles, self._root_state.shape[-1])
        self._states[0] = self._root_state[0]
        self._seen = torch.full((handles, self.geometry.scratch), MASK_MIN)

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
            self._link_mask_np = self._mask.numpy().copy()
            mask = torch.from_numpy(self._link_mask_np)
            if parent:  # the root's children see no scratch column: the mask as it is
                self._tables()
                mask[:, ctx:] = self._seen[parent]  # the parent's ancestors
                states = self._states[parent].expand(w, -1).contiguous()
            else:
                states = self._root_state.expand(w, -1).contiguous()
        else:
            mask, states = self._line_io
        self._link_mask_np[:, ctx + first] = 0.0  # every row sees the new node's slot
        depth = self._depth[parent]
        self._link_ids_np[0] = token  # pad rows stay token 0
        self._link_positions_np.fill(self.position + depth)
        logits, hidden = self.program.run(
            DRAFT_STEP, self._link_ids, states, self._link_positions, geo.step_slots[first], mask
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
        self._tables()
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
        self._tables()
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
