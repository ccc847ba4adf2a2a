"""Attention masks as the methods take them: one column per attended slot.

A mask's width is the one dynamic dimension of every attending method (``models/methods``):
its first ``n`` columns are committed slots ``[0, n)`` and its last ``scratch`` columns the
scratch slots, with ``n`` the committed length a call needs rounded up to
``contract.MASK_GRANULE``. A call therefore costs what its actual context costs. A target
with sliding layers also takes their band (``band``): the slots those layers attend.

The layout is the contract's (``etspec.contract``: ``MASK_MIN``, ``mask_width``,
``band_start``), not a model's: the runtime builds the masks an artifact's methods take
without importing a model definition (``models/layers`` builds the same ones for export
and training; tests/runtime/test_properties.py checks that the two agree).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from etspec.contract import MASK_MIN, TargetMetadata, band_start, mask_width


class MaskLayout:
    """The mask geometry of one program: ``max_context`` committed slots, then scratch;
    ``window``: its sliding layers' window (0: none, and no band input)."""

    def __init__(self, max_context: int, cache_size: int, window: int = 0) -> None:
        self.max_context = max_context
        self.cache_size = cache_size
        self.scratch = cache_size - max_context
        self.window = window

    @classmethod
    def of(cls, meta: TargetMetadata) -> MaskLayout:
        """The layout of a target program (its band if it has sliding layers)."""
        return cls(meta.max_context, meta.cache_size, meta.sliding_window)

    def band(self, lowest: int, width: int) -> tuple[torch.Tensor, ...]:
        """The inputs that follow a ``width``-column mask for rows whose lowest position is
        ``lowest``: the sliding layers' band (``contract.band_start``), or none."""
        if not self.window:
            return ()
        n = self.committed(width)
        return (_band(band_start(lowest, n, self.window), n, self.max_context, self.cache_size),)

    def width(self, needed: int) -> int:
        """Columns of a mask that shows committed slots ``[0, needed)``."""
        return mask_width(needed, self.max_context, self.cache_size)

    def committed(self, width: int) -> int:
        """Committed slots a ``width``-column mask covers."""
        return width - self.scratch

    def columns(self, width: int) -> torch.Tensor:
        """The slot of each column of a ``width``-column mask (read-only, shared)."""
        return _columns(width, self.max_context, self.cache_size)

    def column_of(self, slots: torch.Tensor, width: int) -> torch.Tensor:
        """The mask column of each of ``slots`` (committed or scratch)."""
        scratch_col = slots - self.max_context + self.committed(width)
        return torch.where(slots < self.max_context, slots, scratch_col)

    def causal_rows(self, start: int, rows: int) -> torch.Tensor:
        """``causal(arange(start, start + rows))`` in three ops: the committed prefix, then
        a lower triangle over the rows' own slots (the host loop's draft extend)."""
        if start + rows > self.max_context:  # pad rows past the context: scratch columns
            return self.causal(torch.arange(start, start + rows))
        width = self.width(start + rows)
        mask = np.full((rows, width), MASK_MIN, dtype=np.float32)  # numpy: see kv_cache
        mask[:, :start] = 0.0
        mask[:, start : start + rows] = _triangle(rows).numpy()
        return torch.from_numpy(mask)

    def decode_row(self, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tensor([position]), causal(tensor([position])))`` of one decode, built
        directly: its row sees committed slots ``0..position`` and no scratch slot (the
        decode loop's per-token host work; ``causal``'s comparison over every column and
        its tensor round trips were most of it)."""
        pos = torch.from_numpy(np.array([position], dtype=np.int64))
        if position >= self.max_context:  # a padded row: scratch columns
            return pos, self.causal(pos)
        mask = np.full((1, self.width(position + 1)), MASK_MIN, dtype=np.float32)
        mask[0, : position + 1] = 0.0
        return pos, torch.from_numpy(mask)

    def causal(self, positions: torch.Tensor) -> torch.Tensor:
        """Causal mask of rows at ``positions`` (slot == position), as narrow as they allow.
        Built in numpy: right after a program call (every decode step's next mask) the
        same torch ops took 190 us of a 12 ms Gemma 3 270M step, numpy's about 5."""
        pos = positions.detach().cpu().numpy()
        width = self.width(int(pos.max()) + 1)
        visible = _columns_np(width, self.max_context, self.cache_size)[None, :] <= pos[:, None]
        mask = np.full(visible.shape, MASK_MIN, dtype=np.float32)
        mask[visible] = 0.0
        return torch.from_numpy(mask)


@lru_cache(maxsize=32)
def _columns(width: int, max_context: int, cache_size: int) -> torch.Tensor:
    """Committed slots ``[0, n)``, then every scratch slot (``n = width - scratch``)."""
    n = width - (cache_size - max_context)
    return torch.cat((torch.arange(n), torch.arange(max_context, cache_size)))


@lru_cache(maxsize=32)
def _columns_np(width: int, max_context: int, cache_size: int) -> np.ndarray:
    """``_columns`` as a read-only numpy array."""
    out = _columns(width, max_context, cache_size).numpy().copy()
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _band(start: int, committed: int, max_context: int, cache_size: int) -> torch.Tensor:
    return torch.cat((torch.arange(start, committed), torch.arange(max_context, cache_size)))


@lru_cache(maxsize=16)
def _triangle(rows: int) -> torch.Tensor:
    """``[rows, rows]``: 0 on and below the diagonal, ``MASK_MIN`` above (read-only)."""
    return torch.full((rows, rows), MASK_MIN).triu_(1)
