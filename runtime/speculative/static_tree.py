"""Static trees: a fixed set of rank paths, filled each step with the draft's top tokens.

A node is a path of child ranks from the root (EAGLE-1 "choices"): ``(0,)`` is the root's
most likely child, ``(1, 0)`` the most likely child of its second most likely child. Each
level feeds every node that has children in one batched expansion and places the draft's
top-``r`` tokens of each into its ranked children (Meta's greedy draft decoding).

Three ways to name one (also as ``--static-tree`` strings):
- ``D3xBF2``: the full tree of depth 3 and branching factor 2 (Meta's D_m-BF_n);
- ``N8``: the 8 nodes of highest prior acceptance, best-first (Meta's pruned N_i trees);
- ``[[0], [1], [0, 0]]``: an explicit choice list, as JSON.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Sequence

from etspec.contract import DEFAULT_RANK_ACCEPT, message
from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_runner import Proposal
from etspec.runtime.speculative.shapes import Expander, ShapeCost, TreeShape, top

Path = tuple[int, ...]


class StaticTree(TreeShape):
    def __init__(self, choices: Iterable[Sequence[int]], name: str | None = None) -> None:
        paths = sorted({tuple(int(r) for r in c) for c in choices}, key=lambda p: (len(p), p))
        if not paths:
            raise EtspecError(message("static_tree_empty"))
        present = set(paths)
        for p in paths:
            if not p or min(p) < 0:
                raise EtspecError(message("tree_choice_ranks", path=list(p)))
            if len(p) > 1 and p[:-1] not in present:
                raise EtspecError(message("tree_choice_parent", path=list(p), parent=list(p[:-1])))
        self.choices: list[Path] = paths
        self.name = name or f"static{len(paths)}"

    @classmethod
    def full(cls, depth: int, branching: int) -> StaticTree:
        """Every path of at most ``depth`` ranks below ``branching``."""
        if depth < 1 or branching < 1:
            raise EtspecError(message("full_tree"))
        level: list[Path] = [()]
        paths: list[Path] = []
        for _ in range(depth):
            level = [(*p, r) for p in level for r in range(branching)]
            paths += level
        return cls(paths, f"D{depth}xBF{branching}")

    @classmethod
    def pruned(
        cls,
        nodes: int,
        rank_accept: Sequence[float] = DEFAULT_RANK_ACCEPT,
        max_depth: int | None = None,
    ) -> StaticTree:
        """The ``nodes`` paths of highest prior acceptance (product of per-rank priors),
        found best-first so the result is closed under parents."""
        if nodes < 1:
            raise EtspecError(message("pruned_tree", nodes=nodes))
        if not rank_accept or not all(0 < a <= 1 for a in rank_accept):
            raise EtspecError("rank acceptance priors must be in (0, 1]")
        frontier: list[tuple[float, int, Path]] = [(-rank_accept[0], 1, (0,))]
        paths: list[Path] = []
        while frontier and len(paths) < nodes:
            neg, _, p = heapq.heappop(frontier)
            paths.append(p)
            prob = -neg
            if max_depth is None or len(p) < max_depth:
                heapq.heappush(frontier, (-prob * rank_accept[0], len(p) + 1, (*p, 0)))
            r = p[-1] + 1
            if r < len(rank_accept):
                sibling = -prob / rank_accept[r - 1] * rank_accept[r]
                heapq.heappush(frontier, (sibling, len(p), (*p[:-1], r)))
        return cls(paths, f"N{len(paths)}")

    @classmethod
    def parse(cls, spec: str) -> StaticTree:
        """``D3xBF2``, ``N8`` or a JSON choice list (see the module docstring)."""
        text = spec.strip()
        full = re.fullmatch(r"[dD](\d+)\s*[xX-]?\s*[bB][fF](\d+)", text)
        if full:
            return cls.full(int(full.group(1)), int(full.group(2)))
        pruned = re.fullmatch(r"[nN](\d+)", text)
        if pruned:
            return cls.pruned(int(pruned.group(1)))
        try:
            choices = json.loads(text)
            if not isinstance(choices, list):
                raise ValueError
            return cls(choices)
        except (ValueError, TypeError):
            raise EtspecError(message("static_tree_unreadable", spec=spec)) from None

    @property
    def cost(self) -> ShapeCost:
        parents = {p[:-1] for p in self.choices if len(p) > 1}
        height = len(self.choices[-1])
        return ShapeCost(len(self.choices), height, len(parents), height - 1)

    def grow(self, expander: Expander, max_height: int, sampler: Sampler) -> Proposal:
        paths = [p for p in self.choices if len(p) <= max_height]
        row: dict[Path, int] = {(): 0}  # tree row of each path
        handle: dict[Path, int] = {(): 0}  # expander handle of each fed path
        tokens: list[int] = []
        parents: list[int] = []
        fed = 0
        depth, i = 1, 0
        while i < len(paths):
            level = []
            while i < len(paths) and len(paths[i]) == depth:
                level.append(paths[i])
                i += 1
            # A parent the draft vocabulary could not fill has no row: drop its subtree.
            level = [p for p in level if p[:-1] in row]
            if not level:
                break
            heads = list(dict.fromkeys(p[:-1] for p in level))  # parents in order
            if depth == 1:
                logits = expander.root().reshape(1, -1)
            else:
                logits = expander.expand(
                    [handle[h[:-1]] for h in heads], [tokens[row[h] - 1] for h in heads]
                )
                for h in heads:
                    fed += 1
                    handle[h] = fed
            ranked = {}
            for h, lg in zip(heads, logits, strict=True):
                width = 1 + max(p[-1] for p in level if p[:-1] == h)
                ranked[h] = expander.target_ids[top(lg, width)].tolist()
            for p in level:
                options = ranked[p[:-1]]
                if p[-1] >= len(options):
                    continue  # the draft vocabulary has fewer tokens than this rank
                tokens.append(options[p[-1]])
                parents.append(row[p[:-1]])
                row[p] = len(tokens)
            depth += 1
        # Greedy drafts: every node is the draft's deterministic pick (probs=None).
        return Proposal(tokens, parents, None, expander.calls)
