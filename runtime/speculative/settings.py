"""The ``--tree`` settings and shape names: one parser for every name a shape is given
(``chain3``, ``N7``, ``D3xBF2``, ``dynamic-d3k4t16``), the inverse of each shape's ``name``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from etspec.contract import (
    AUTO_MAX_CHAIN,
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_DYNAMIC_TOPK,
    NO_DRAFT_SHAPE,
    ROW_QUANTIZED_DTYPES,
    STATIC_TREE_MAX_NODES,
    TargetMetadata,
    default_dynamic_depth,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.speculative.dispatcher import AutoTree
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.shapes import ChainShape, NoDraftShape, TreePolicy, TreeShape
from etspec.runtime.speculative.static_tree import StaticTree

TREE_MODES = ("chain", "static", "dynamic", "auto")


def parse_shape(name: str) -> TreeShape:
    """A fixed shape from the name stats and ``AutoTree.report()`` give it: ``chain3``,
    ``dynamic-d3k4t16``, or a static tree (``N7``, ``D3xBF2``)."""
    if name == NO_DRAFT_SHAPE:
        return NoDraftShape()
    chain = re.fullmatch(r"chain(\d+)", name)
    if chain:
        return ChainShape(int(chain.group(1)))
    dynamic = re.fullmatch(r"dynamic-d(\d+)k(\d+)t(\d+)", name)
    if dynamic:
        depth, topk, total = (int(g) for g in dynamic.groups())
        return DynamicTree(depth=depth, topk=topk, total_tokens=total)
    return StaticTree.parse(name)


def default_dynamic(width: int, topk: int = DEFAULT_DYNAMIC_TOPK) -> DynamicTree:
    """A dynamic tree filling a verify width: deeper for wider budgets (depth 2..5)."""
    return DynamicTree(depth=default_dynamic_depth(width), topk=topk, total_tokens=width)


def auto_candidates(target: TargetMetadata, branching: bool) -> list[TreeShape]:
    """The step that drafts nothing, chains of every length from 2 to ``AUTO_MAX_CHAIN`` that
    fit and, for drafts that can branch, static and dynamic trees filling each width (not on
    a target whose recipe quantizes activations per row: ``contract.ROW_QUANTIZED_DTYPES``)."""
    shapes: dict[str, TreeShape] = {NO_DRAFT_SHAPE: NoDraftShape()}
    branching = branching and target.dtype not in ROW_QUANTIZED_DTYPES
    # Every chain length is cheap to consider: they pool their acceptance (DepthAcceptance).
    longest = min(target.verify_width - 1, AUTO_MAX_CHAIN)
    for n in range(min(2, longest), longest + 1):
        if n >= 1:
            shapes[f"chain{n}"] = ChainShape(n)
    for w in target.verify_widths:
        if branching and w >= 4:
            static = StaticTree.pruned(w - 1)
            shapes.setdefault(static.name, static)
        if branching and w >= 8:
            dynamic = default_dynamic(w)
            shapes.setdefault(dynamic.name, dynamic)
    return list(shapes.values())


@dataclass(frozen=True)
class TreeSettings:
    """User-facing tree options (``--tree`` and friends), resolved per artifact."""

    mode: str = "auto"
    num_spec_tokens: int = DEFAULT_CHAIN_LENGTH  # chain length
    static_tree: str | None = None  # D3xBF2 / N8 / JSON choices (default: N fills K - 1)
    depth: int | None = None  # dynamic: expansion passes (EAGLE repo); default from K
    topk: int | None = None
    total_tokens: int | None = None  # dynamic: nodes incl. the root; default K

    def policy(self, target: TargetMetadata, branching: bool) -> TreePolicy:
        if self.mode not in TREE_MODES:
            raise EtspecError(
                message(
                    "unknown_choice", what="--tree", value=self.mode, choices=", ".join(TREE_MODES)
                )
            )
        if self.mode == "chain":
            return ChainShape(self.num_spec_tokens)
        if self.mode == "static":
            if self.static_tree is None:
                nodes = min(target.verify_width - 1, STATIC_TREE_MAX_NODES)
                return StaticTree.pruned(max(1, nodes))
            return StaticTree.parse(self.static_tree, target.verify_width)
        if self.mode == "dynamic":
            base = default_dynamic(target.verify_width)
            return DynamicTree(
                depth=base.depth if self.depth is None else self.depth,
                topk=base.topk if self.topk is None else self.topk,
                total_tokens=base.total_tokens if self.total_tokens is None else self.total_tokens,
            )
        return AutoTree(auto_candidates(target, branching), target.verify_widths)
