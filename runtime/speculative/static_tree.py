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
import math
import re
from collections.abc import Iterable, Sequence

from etspec.contract import DEFAULT_RANK_ACCEPT, message, quote
from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.shapes import Expander, TreeShape, top
from etspec.runtime.speculative.step import Proposal, ShapeCost

Path = tuple[int, ...]


def _path(choice: object) -> Path:
    """One rank path; ranks are plain integers >= 0 (not 0.5, "0", true or 1e400)."""
    if (
        not isinstance(choice, (list, tuple))
        or not choice
        or not all(type(r) is int and r >= 0 for r in choice)
    ):
        raise EtspecError(message("tree_choice_ranks", path=choice))
    return tuple(choice)


def check_size(name: str, nodes: int, width: int | None) -> None:
    """Refuse a tree of ``nodes`` draft tokens that a ``width``-row verify cannot hold, from
    its description and before it is built (``D12xBF12`` would be 9 trillion paths)."""
    if width is not None and nodes + 1 > width:
        raise EtspecError(
            message("tree_too_wide", name=name, nodes=nodes, need=nodes + 1, width=width)
        )


class StaticTree(TreeShape):
    def __init__(self, choices: Iterable[Sequence[int]], name: str | None = None) -> None:
        paths = sorted({_path(c) for c in choices}, key=lambda p: (len(p), p))
        if not paths:
            raise EtspecError(message("static_tree_empty"))
        present = set(paths)
        for p in paths:
            if len(p) > 1 and p[:-1] not in present:
                raise EtspecError(message("tree_choice_parent", path=list(p), parent=list(p[:-1])))
        self.choices: list[Path] = paths
        self.name = name or f"static{len(paths)}"

    def settings(self) -> TreeSettings | None:
        # Its name where the name parses back into it (N7, D3xBF2: stats keep that name).
        named = re.fullmatch(r"N\d+|D\d+xBF\d+", self.name) is not None
        tree = self.name if named else json.dumps([list(p) for p in self.choices])
        return TreeSettings("static", static_tree=tree)

    @classmethod
    def full(cls, depth: int, branching: int, width: int | None = None) -> StaticTree:
        """Every path of at most ``depth`` ranks below ``branching`` (refused before it is
        built when a ``width``-row verify cannot hold it)."""
        if depth < 1 or branching < 1:
            raise EtspecError(message("full_tree"))
        if width is not None:
            name = f"D{depth}xBF{branching}"
            if branching > 1 and depth * math.log2(branching) > 64:  # past any verify width
                raise EtspecError(
                    message("tree_too_wide", name=name, nodes=f"over 2^{depth}",
                            need=f"over 2^{depth}", width=width)
                )  # fmt: skip
            nodes = (
                depth
                if branching == 1
                else (branching ** (depth + 1) - branching) // (branching - 1)
            )
            check_size(name, nodes, width)
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
        width: int | None = None,
    ) -> StaticTree:
        """The ``nodes`` paths of highest prior acceptance (product of per-rank priors),
        found best-first so the result is closed under parents."""
        if nodes < 1:
            raise EtspecError(message("pruned_tree", nodes=nodes))
        check_size(f"N{nodes}", nodes, width)
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
    def parse(cls, spec: str, width: int | None = None) -> StaticTree:
        """``D3xBF2``, ``N8`` or a JSON choice list (see the module docstring); with
        ``width``, one a ``width``-row verify cannot hold is refused before it is built."""
        text = spec.strip()
        full = re.fullmatch(r"[dD](\d+)\s*[xX-]?\s*[bB][fF](\d+)", text)
        if full:
            return cls.full(int(full.group(1)), int(full.group(2)), width)
        pruned = re.fullmatch(r"[nN](\d+)", text)
        if pruned:
            return cls.pruned(int(pruned.group(1)), width=width)
        try:
            choices = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: JSON nested past the stack
            raise EtspecError(message("static_tree_unreadable", spec=quote(spec))) from None
        if not isinstance(choices, list):
            raise EtspecError(message("static_tree_unreadable", spec=quote(spec)))
        check_size(f"static{len(choices)}", len(choices), width)
        return cls(choices)

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
