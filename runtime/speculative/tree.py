"""Draft trees as tensors: the shape every proposal takes on its way to ``target_verify``.

The tensorization of EAGLE-Pangu section 3.2. Row 0 is a dummy root, the last emitted token
(not yet in the target's KV cache); rows ``1..M`` are draft nodes in BFS order (depth never
decreases), each with a parent in ``[0, i)``. Because the root is a real row, every parent
and ancestor index is in ``[0, C]`` by construction: no -1 sentinel ever reaches a gather.
A tree may be padded to a capacity ``C >= M``: padded rows have parent 0, depth 0, token 0
and ``valid = False``, and the mask hides them from every row and every row from them.

``ancestor_table`` is ``A[(Dmax+1), (C+1)]`` with ``A[0, k] = k`` and
``A[l+1, k] = parents[A[l, k]]``; ``mask[k, j]`` (bool) is "j is k or an ancestor of k, and
both are valid", i.e. ``exists l: A[l, k] == j``. A chain is ``parents = [0, 0, 1, 2, ...]``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from etspec.errors import EtspecError


class TreeError(EtspecError):
    """A draft tree violates the tensorization invariants."""


@dataclass(frozen=True)
class DraftTree:
    tokens: torch.Tensor  # [C+1] long, target-vocabulary ids; tokens[0] is the root
    parents: torch.Tensor  # [C+1] long in [0, C]; parents[0] == 0
    depth: torch.Tensor  # [C+1] long; depth[0] == 0
    valid: torch.Tensor  # [C+1] bool; rows 0..M are valid, padding is not
    ancestor_table: torch.Tensor  # [Dmax+1, C+1] long, every entry in [0, C]
    mask: torch.Tensor  # [C+1, C+1] bool: row k sees column j

    @functools.cached_property
    def size(self) -> int:
        """Number of draft nodes M (root and padding excluded)."""
        return int(self.valid.sum()) - 1

    @property
    def capacity(self) -> int:
        """Node slots C (M plus padding)."""
        return int(self.tokens.numel()) - 1

    @functools.cached_property
    def max_depth(self) -> int:
        return int(self.ancestor_table.shape[0]) - 1

    # Python views of the tree for the host loop (verifier, KV manager). ``build`` fills
    # them from its arguments, so a step reads lists instead of syncing tensors.
    @functools.cached_property
    def token_list(self) -> list[int]:
        """``tokens`` as ints (root first, padding included)."""
        return self.tokens.tolist()

    @functools.cached_property
    def parent_list(self) -> tuple[int, ...]:
        """Parents of rows 1..C as ints (the tree's structure, a hashable key)."""
        return tuple(self.parents.tolist()[1:])

    @functools.cached_property
    def children(self) -> list[list[int]]:
        """Valid children of every row, in row order (shared between trees: read only)."""
        return _children(self.parent_list, tuple(self.valid.tolist()))

    def first_branch(self, path: Sequence[int]) -> tuple[int, int]:
        """(How deep the first branch goes, how many of its nodes ``path`` accepted): the
        branch from the root through each row's first child, which every drafter here ranks
        first (its top token), so it is the chain a chain step would have drafted.
        ``path`` is the accepted rows, root first."""
        children, row, height, accepted = self.children, 0, 0, 0
        while children[row]:
            row = children[row][0]
            height += 1
            if accepted == height - 1 and height < len(path) and path[height] == row:
                accepted = height
        return height, accepted

    @classmethod
    def build(cls, root: int, tokens: Sequence[int], parents: Sequence[int]) -> DraftTree:
        """From draft nodes 1..M given as ``tokens`` and ``parents`` (0 is the root).

        Raises ``TreeError`` for a parent out of range or not preceding its child (which
        also rules out cycles) and for nodes not in BFS order.
        """
        if len(tokens) != len(parents):
            raise TreeError(f"{len(tokens)} draft tokens but {len(parents)} parents")
        structure = tuple(int(p) for p in parents)
        token_list = [int(root), *(int(t) for t in tokens)]
        tokens_np = np.array(token_list, dtype=np.int64)  # numpy: no torch op per step
        tree = cls(torch.from_numpy(tokens_np), *_shape(structure))
        # The cached properties, from what was given (every row of a built tree is valid).
        tree.__dict__.update(
            token_list=token_list,
            parent_list=structure,
            size=len(structure),
            children=_children(structure, (True,) * (len(structure) + 1)),
        )
        return tree

    @classmethod
    def chain(cls, root: int, tokens: Sequence[int]) -> DraftTree:
        return cls.build(root, tokens, list(range(len(tokens))))

    @classmethod
    def from_arrays(
        cls,
        tokens: torch.Tensor,
        parents: torch.Tensor,
        depth: torch.Tensor,
        valid: torch.Tensor,
        depth_rows: int = 0,
    ) -> DraftTree:
        """Derive the ancestor table (at least ``depth_rows`` rows) and the mask from base
        arrays. Nothing is validated here: see ``check``."""
        c1 = int(tokens.numel())
        # Out-of-range parents are clamped only for the derived tables, so that ``check``
        # can report them instead of an indexing error; they are never used unchecked.
        safe = parents.clamp(0, c1 - 1)
        dmax = int(depth[valid].max()) if bool(valid.any()) else 0
        rows = [torch.arange(c1)]
        for _ in range(max(dmax + 1, depth_rows) - 1):
            rows.append(safe[rows[-1]])
        table = torch.stack(rows)
        mask = torch.zeros(c1, c1, dtype=torch.bool)
        mask.scatter_(1, table.T, True)
        mask &= valid[:, None] & valid[None, :]
        return cls(tokens, parents, depth, valid, table, mask)

    def padded(self, capacity: int, depth_rows: int | None = None) -> DraftTree:
        """This tree with ``capacity`` node slots (and ``depth_rows`` ancestor-table rows)."""
        c1, new = self.capacity + 1, capacity + 1
        if capacity < self.capacity:
            raise TreeError(f"cannot pad a tree of capacity {self.capacity} to {capacity}")
        extra = new - c1

        def pad(t: torch.Tensor, value: int | bool) -> torch.Tensor:
            return torch.cat([t, torch.full((extra,), value, dtype=t.dtype)])

        # Applying ``parents`` past the root stays at the root: extra table rows are zeros.
        return DraftTree.from_arrays(
            pad(self.tokens, 0),
            pad(self.parents, 0),
            pad(self.depth, 0),
            pad(self.valid, False),
            depth_rows or 0,
        )

    def check(self, vocab_size: int | None = None) -> None:
        """The structural invariants of EAGLE-Pangu 3.2; raises ``TreeError`` naming the first
        violated one. Run before every verify in reference mode."""
        c1 = self.capacity + 1
        par, depth, valid = self.parents, self.depth, self.valid
        for name, t in (("parents", par), ("depth", depth), ("tokens", self.tokens)):
            if t.shape != (c1,):
                raise TreeError(f"{name} has shape {tuple(t.shape)}, expected ({c1},)")
        if not bool(valid[0]) or int(par[0]) != 0 or int(depth[0]) != 0:
            raise TreeError("row 0 must be the valid root (parent 0, depth 0)")
        # Range: every parent index is a row.
        bad = (par < 0) | (par >= c1)
        if bool(bad.any()):
            k = int(bad.nonzero()[0])
            raise TreeError(f"node {k} has parent {int(par[k])}, outside [0, {c1 - 1}]")
        if (
            self.tokens.dtype != torch.long
            or bool((self.tokens < 0).any())
            or (vocab_size is not None and bool((self.tokens[valid] >= vocab_size).any()))
        ):
            raise TreeError(f"tree tokens must be ids in [0, {vocab_size or 'vocab'})")
        rows = torch.arange(c1)
        real = valid & (rows > 0)
        # Validity closure: a valid node's parent is valid.
        orphan = real & ~valid[par]
        if bool(orphan.any()):
            k = int(orphan.nonzero()[0])
            raise TreeError(f"node {k} is valid but its parent {int(par[k])} is padding")
        # Acyclicity and depth consistency: one level per parent step, root within depth.
        step = real & (depth[par] != depth - 1)
        if bool(step.any()):
            k = int(step.nonzero()[0])
            raise TreeError(
                f"node {k} has depth {int(depth[k])} but its parent {int(par[k])} has depth "
                f"{int(depth[par[k]])}: a cycle or an inconsistent depth"
            )
        table = self.ancestor_table
        if table.shape[0] <= int(depth[valid].max()) or table.shape[1] != c1:
            raise TreeError(f"ancestor table has shape {tuple(table.shape)}, too small")
        if bool(((table < 0) | (table >= c1)).any()):
            raise TreeError("ancestor table has an index outside the tree")
        reach = table.gather(0, depth.clamp(0, table.shape[0] - 1)[None])[0]
        if bool((reach[valid] != 0).any()):
            k = int((valid & (reach != 0)).nonzero()[0])
            raise TreeError(f"node {k} does not reach the root in {int(depth[k])} parent steps")
        if bool((table[0] != rows).any()) or bool((table[1:] != par[table[:-1]]).any()):
            raise TreeError("ancestor table disagrees with the parent array")
        want = DraftTree.from_arrays(self.tokens, par, depth, valid).mask
        if not torch.equal(self.mask, want):
            raise TreeError("tree mask differs from the ancestor relation")


@functools.lru_cache(maxsize=512)
def _shape(parents: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """Validated ``(parents, depth, valid, ancestor_table, mask)`` of the tree whose nodes
    1..M have ``parents``. Memoized: steps repeat a few shapes (a chain of each length, a
    static tree), so the hot loop rebuilds none of this. The tensors are shared between
    trees and never written to."""
    m = len(parents)
    par = [0, *parents]
    depth = [0] * (m + 1)
    for i in range(1, m + 1):
        p = par[i]
        if not 0 <= p < i:
            raise TreeError(
                f"node {i} has parent {p}; parents must be earlier nodes (0 is the root)"
            )
        depth[i] = depth[p] + 1
        if depth[i] < depth[i - 1]:
            raise TreeError(f"node {i} (depth {depth[i]}) follows a deeper node: not BFS order")
    tree = DraftTree.from_arrays(
        torch.zeros(m + 1, dtype=torch.long),
        torch.tensor(par, dtype=torch.long),
        torch.tensor(depth, dtype=torch.long),
        torch.ones(m + 1, dtype=torch.bool),
    )
    return _fields(tree)[1:]


def _fields(tree: DraftTree) -> tuple[torch.Tensor, ...]:
    return (tree.tokens, tree.parents, tree.depth, tree.valid, tree.ancestor_table, tree.mask)


@functools.lru_cache(maxsize=512)
def _children(parents: tuple[int, ...], valid: tuple[bool, ...]) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, p in enumerate(parents, start=1):
        if valid[i]:
            out[p].append(i)
    return out
