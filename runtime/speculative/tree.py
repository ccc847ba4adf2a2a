"""Draft trees as tensors: the shape every proposal takes on its way to ``target_verify``.

Row 0 is a dummy root, the last emitted token (not yet in the target's KV cache); rows
``1..M`` are draft nodes in BFS order, each with a parent in ``[0, i)``. Because the root is
a real row, every parent and ancestor index is in ``[0, M]`` by construction: no -1 sentinel
ever reaches a gather. A chain is the path-shaped case ``parents = [0, 0, 1, 2, ...]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from etspec.errors import EtspecError


class TreeError(EtspecError):
    """A draft tree violates the tensorization invariants."""


@dataclass(frozen=True)
class DraftTree:
    tokens: torch.Tensor  # [M+1] long, target-vocabulary ids; tokens[0] is the root
    parents: torch.Tensor  # [M+1] long, parents[0] == 0
    depth: torch.Tensor  # [M+1] long, depth[0] == 0
    ancestors: torch.Tensor  # [M+1, M+1] bool: ancestors[i, j] iff j is i or an ancestor of i

    @property
    def size(self) -> int:
        """Number of draft nodes M (the root excluded)."""
        return int(self.tokens.numel()) - 1

    @classmethod
    def build(cls, root: int, tokens: list[int], parents: list[int]) -> DraftTree:
        """From draft nodes 1..M given as ``tokens`` and ``parents`` (0 is the root)."""
        if len(tokens) != len(parents):
            raise TreeError(f"{len(tokens)} draft tokens but {len(parents)} parents")
        m = len(tokens)
        par = [0, *parents]
        depth = [0] * (m + 1)
        anc = torch.zeros(m + 1, m + 1, dtype=torch.bool)
        anc[0, 0] = True
        for i in range(1, m + 1):
            p = par[i]
            if not 0 <= p < i:
                raise TreeError(f"node {i} has parent {p}; parents must precede children")
            depth[i] = depth[p] + 1
            anc[i] = anc[p]
            anc[i, i] = True
        return cls(
            tokens=torch.tensor([root, *tokens], dtype=torch.long),
            parents=torch.tensor(par, dtype=torch.long),
            depth=torch.tensor(depth, dtype=torch.long),
            ancestors=anc,
        )

    @classmethod
    def chain(cls, root: int, tokens: list[int]) -> DraftTree:
        return cls.build(root, tokens, list(range(len(tokens))))

    def children(self, node: int) -> list[int]:
        return [i for i in range(1, self.size + 1) if int(self.parents[i]) == node]

    def path(self, node: int) -> list[int]:
        """Rows from the root to ``node``, both included."""
        rows = [node]
        while rows[-1] != 0:
            rows.append(int(self.parents[rows[-1]]))
        return rows[::-1]
