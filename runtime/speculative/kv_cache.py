"""SpecKVCacheManager: where verify writes, what the mask shows, what a step commits.

The invariant (ExecuTorch EAGLE-3 RFC): committed target KV is valid through the last token
written to it, i.e. slots ``[0, committed)`` hold exactly the KV of sequential decoding of
``tokens[:committed]``; rejected entries are unreachable by the mask or never committed.

``position-overwrite``: tree row i is written at slot ``committed + i``. Rows past the
accepted path are left where they are; nothing attends to a slot ``>= committed`` except
the rows of the current verify, and the next verify rewrites those slots before reading.
When the accepted path is not contiguous (a tree branch) it is moved down with
``target_commit``.

``scratch-commit``: tree row i is written to scratch slot ``max_context + i``; no committed
slot is touched by verify; ``target_commit`` copies the accepted rows to
``[committed, committed + n]``.

Commit is by path index (EAGLE-Pangu 3.1): the accepted rows ``nodes`` are gathered to
``committed + [0, n)`` inside the ``.pte`` (``target_commit``), never by re-running the
model. The committed prefix never moves (slot == position), so only the new segment is
copied, and when it is already in place (a chain, or a first-branch path under
position-overwrite) the call is skipped altogether.

Each verify runs the narrowest compiled ``target_verify`` width that holds the tree; a
proposal of nothing runs ``target_decode``.
"""

from __future__ import annotations

import numpy as np
import torch

from etspec.contract import (
    KV_STRATEGIES,
    MASK_MIN,
    POSITION_OVERWRITE,
    TARGET_COMMIT,
    TARGET_DECODE,
    TargetMetadata,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.speculative.tree import DraftTree


class KVInvariantError(EtspecError):
    """The committed cache no longer matches the committed sequence (a runtime bug)."""


def check_kv_strategy(meta: TargetMetadata, strategy: str) -> None:
    if strategy not in KV_STRATEGIES:
        raise EtspecError(
            message(
                "unknown_choice",
                what="KV strategy",
                value=strategy,
                choices=", ".join(KV_STRATEGIES),
            )
        )
    if strategy not in meta.kv_strategies.split(","):
        raise EtspecError(
            message("kv_strategy_unsupported", strategy=strategy, supported=meta.kv_strategies)
        )
    if strategy != POSITION_OVERWRITE and meta.row_quantized:
        raise EtspecError(message("inexact_kv", strategy=strategy, dtype=meta.dtype))


class SpecKVCacheManager:
    def __init__(self, program: Program, strategy: str, committed: int) -> None:
        meta = program.metadata
        assert isinstance(meta, TargetMetadata)
        check_kv_strategy(meta, strategy)
        self.program = program
        self.strategy = strategy
        self.committed = committed
        self.meta = meta
        self.max_context = meta.max_context
        self.cache_size = meta.cache_size
        self._rows = torch.arange(meta.verify_width)
        self._rows_np = self._rows.numpy()
        self._layout = MaskLayout.of(meta)
        self._slots = torch.empty(0, dtype=torch.long)
        self._base = -1  # the last verify's first slot (``_slots[0]``)
        # Per (tree structure, verify width): the mask block and positions of an in-place
        # verify. A few shapes repeat (a policy's candidates), so this stays small.
        self._templates: dict[tuple[tuple[int, ...], int], tuple[np.ndarray, np.ndarray]] = {}
        # The reference program checks the invariant after every step against its live cache.
        self._cache = program.cache_tensors() if program.reference else []
        self._snapshot: list[torch.Tensor] = []

    def verify_inputs(self, tree: DraftTree) -> tuple[str, tuple[torch.Tensor, ...]]:
        """The verify method for ``tree`` and its ``(tokens[K], positions[K], slots[K],
        mask[K, W][, band])`` (``MaskLayout.band``). Tree rows (padding included) come
        first; the rows after them, and the tree's own padding, see only their own slot:
        finite, and seen by no real row."""
        m1, c = tree.capacity + 1, self.committed
        if m1 == 1:
            return TARGET_DECODE, self.decode_inputs(tree.tokens[:1])
        if self._cache:
            self._snapshot = [t[:, :c].clone() for t in self._cache]
        k = self.meta.verify_width_for(m1)
        in_place = self.strategy == POSITION_OVERWRITE
        if in_place and tree.size == tree.capacity and c + k <= self.max_context:
            return self._in_place_inputs(tree, k)
        base = c if in_place else self.max_context
        slots = base + self._rows[:k]
        width = self._layout.width(c + k if in_place else c)
        cols = self._layout.column_of(slots, width)
        positions = torch.empty(k, dtype=torch.long)
        positions[:m1] = c + tree.depth  # RoPE position = root position + depth
        positions[m1:] = c + m1 + self._rows[: k - m1]
        tokens = torch.zeros(k, dtype=torch.long)
        tokens[:m1] = tree.tokens
        mask = torch.full((k, width), MASK_MIN)
        mask[:m1, :c] = torch.where(tree.valid, 0.0, MASK_MIN)[:, None]
        tree_cols = torch.where(tree.mask, 0.0, MASK_MIN)
        mask[:m1].index_copy_(1, cols[:m1], tree_cols)
        alone = torch.ones(k, dtype=torch.bool)
        alone[:m1] = ~tree.valid
        mask[alone, cols[alone]] = 0.0
        # Commit copies the full widest window; the slots past this verify's are unused.
        self._slots, self._base = base + self._rows, base
        band = self._layout.band(c, width)
        return self.meta.verify_method(k), (tokens, positions, slots, mask, *band)

    def decode_inputs(self, token: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(token, position, mask[, band])`` of one ``target_decode`` of ``token`` [1] (the
        root) at the committed length: it writes the root's committed slot directly, so the
        ``commit([0])`` that follows has nothing to move. Cheaper than the narrowest verify:
        a step that proposes nothing runs it."""
        c = self.committed
        if self._cache:
            self._snapshot = [t[:, :c].clone() for t in self._cache]
            self._slots = torch.from_numpy(c + self._rows_np)  # commit's checked path reads it
        self._base = c  # the root's row is in its slot: commit([0]) moves nothing
        position, mask = self._layout.decode_row(c)
        band = self._layout.band(c, mask.shape[-1])
        return (token, position, mask, *band)

    def _in_place_inputs(self, tree: DraftTree, k: int) -> tuple[str, tuple[torch.Tensor, ...]]:
        """``verify_inputs`` of an unpadded tree verified in its own slots ``c..c+k-1``
        (position-overwrite): the same tensors from a per-shape template, built in numpy
        (a few array ops of ~1 us each, where torch ops cost 5-15 us right after a program
        call; ``scripts/profile_step.py``)."""
        c, m1 = self.committed, tree.capacity + 1
        block, offsets = self._template(tree, k)
        width = self._layout.width(c + k)
        mask = np.full((k, width), MASK_MIN, dtype=np.float32)
        mask[:m1, :c] = 0.0
        mask[:, c : c + k] = block
        tokens = np.zeros(k, dtype=np.int64)
        tokens[:m1] = tree.token_list
        slots = c + self._rows_np
        self._slots, self._base = torch.from_numpy(slots), c
        band = self._layout.band(c, width)
        return self.meta.verify_method(k), (
            torch.from_numpy(tokens),
            torch.from_numpy(c + offsets),
            self._slots[:k],
            torch.from_numpy(mask),
            *band,
        )

    def _template(self, tree: DraftTree, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``[k, k]`` mask block over a tree's own slots (tree rows see their ancestors,
        the rows after the tree only themselves) and each row's position offset."""
        key = (tree.parent_list, k)
        hit = self._templates.get(key)
        if hit is None:
            m1 = tree.capacity + 1
            block = torch.full((k, k), MASK_MIN)
            block[:m1, :m1] = torch.where(tree.mask, 0.0, MASK_MIN)
            block[range(m1, k), range(m1, k)] = 0.0
            offsets = torch.cat((tree.depth, m1 + self._rows[: k - m1]))
            hit = self._templates[key] = (block.numpy(), offsets.numpy())
        return hit

    def commit(self, nodes: list[int]) -> int:
        """Commit the accepted tree rows ``nodes`` (root first); returns commit calls made."""
        c, n = self.committed, len(nodes)
        if not self._cache and nodes[-1] == n - 1 and self._base == c:
            # Rows 0..n-1 were verified in their own slots c..c+n-1 (position-overwrite, a
            # chain or a first-branch path): already where they belong.
            self.committed = c + n
            return 0
        src = self._slots[torch.tensor(nodes, dtype=torch.long)]
        dst = c + self._rows[:n]
        if self._cache:
            self._check_untouched()
            written = [t.index_select(1, src.to(t.device)).clone() for t in self._cache]
        calls = 0
        if not torch.equal(src, dst):
            # Unused rows copy a slot onto itself; distinct from every dst by construction.
            full_src = self._slots.clone()
            full_dst = self._slots.clone()
            full_src[:n], full_dst[:n] = src, dst
            self.program.run(TARGET_COMMIT, full_src, full_dst)
            calls = 1
        self.committed = c + n
        if self._cache:
            for t, w in zip(self._cache, written, strict=True):
                if not torch.equal(t[:, c : c + n], w):
                    raise KVInvariantError(
                        f"commit of slots {src.tolist()} -> {dst.tolist()} did not land"
                    )
        return calls

    def _check_untouched(self) -> None:
        c = self._snapshot[0].shape[1] if self._snapshot else 0
        for t, before in zip(self._cache, self._snapshot, strict=True):
            if not torch.equal(t[:, :c], before):
                raise KVInvariantError(
                    f"verify modified committed KV slots below {c} ({self.strategy})"
                )
