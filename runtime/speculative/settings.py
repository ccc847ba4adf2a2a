"""The ``--tree`` policies: the one a ``TreeSettings`` asks for, the candidates of ``auto``,
and one parser for every name a shape is given (``chain3``, ``N7``, ``D3xBF2``,
``dynamic-d3k4t16``), the inverse of each shape's ``name``."""

from __future__ import annotations

import re

from etspec.contract import (
    AUTO_MAX_CHAIN,
    DEFAULT_DYNAMIC_TOPK,
    NO_DRAFT_SHAPE,
    STATIC_TREE_MAX_NODES,
    TargetMetadata,
    default_dynamic_depth,
)
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.dispatcher import Dispatcher
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.shapes import ChainShape, NoDraftShape, TreePolicy, TreeShape
from etspec.runtime.speculative.static_tree import StaticTree, check_size


def parse_shape(name: str, width: int | None = None) -> TreeShape:
    """A fixed shape from the name stats and ``Dispatcher.report()`` give it: ``chain3``,
    ``dynamic-d3k4t16``, or a static tree (``N7``, ``D3xBF2``); with ``width``, one a
    ``width``-row verify cannot hold is refused before it is built (``N999999999`` took
    gigabytes)."""
    if name == NO_DRAFT_SHAPE:
        return NoDraftShape()
    chain = re.fullmatch(r"chain(\d+)", name)
    if chain:
        check_size(name, int(chain.group(1)), width)
        return ChainShape(int(chain.group(1)))
    dynamic = re.fullmatch(r"dynamic-d(\d+)k(\d+)t(\d+)", name)
    if dynamic:
        depth, topk, total = (int(g) for g in dynamic.groups())
        check_size(name, total - 1, width)
        return DynamicTree(depth=depth, topk=topk, total_tokens=total)
    return StaticTree.parse(name, width)


def default_dynamic(width: int, topk: int = DEFAULT_DYNAMIC_TOPK) -> DynamicTree:
    """A dynamic tree filling a verify width: deeper for wider budgets (depth 2..5)."""
    return DynamicTree(depth=default_dynamic_depth(width), topk=topk, total_tokens=width)


def auto_candidates(target: TargetMetadata, branching: bool) -> list[TreeShape]:
    """The model shapes ``--tree auto`` weighs: chains of every length from 1 to
    ``AUTO_MAX_CHAIN`` that fit and, for drafts that can branch, static and dynamic trees
    filling each width (not on a target whose recipe quantizes activations per row:
    ``contract.ROW_QUANTIZED_DTYPES``). The step that drafts nothing and the drafter's offers
    are the dispatcher's own."""
    shapes: dict[str, TreeShape] = {}
    branching = branching and not target.row_quantized
    # Every chain length is cheap to consider: they pool their acceptance (DepthAcceptance).
    longest = min(target.verify_width - 1, AUTO_MAX_CHAIN)
    for n in range(1, longest + 1):
        shapes[f"chain{n}"] = ChainShape(n)
    for w in target.verify_widths:
        if branching and w >= 4:
            static = StaticTree.pruned(w - 1)
            shapes.setdefault(static.name, static)
        if branching and w >= 8:
            dynamic = default_dynamic(w)
            shapes.setdefault(dynamic.name, dynamic)
    return list(shapes.values())


def fixed_shape(settings: TreeSettings, target: TargetMetadata) -> TreeShape:
    """The one shape a ``chain``, ``static`` or ``dynamic`` setting asks for."""
    if settings.mode == "chain":
        return ChainShape(settings.num_spec_tokens)
    if settings.mode == "static":
        if settings.static_tree is None:
            nodes = min(target.verify_width - 1, STATIC_TREE_MAX_NODES)
            return StaticTree.pruned(max(1, nodes))
        return StaticTree.parse(settings.static_tree, target.verify_width)
    base = default_dynamic(target.verify_width)
    depth, topk, total = settings.dynamic_depth, settings.topk, settings.total_tokens
    return DynamicTree(
        depth=base.depth if depth is None else depth,
        topk=base.topk if topk is None else topk,
        total_tokens=base.total_tokens if total is None else total,
    )


def tree_policy(
    settings: TreeSettings | TreePolicy, target: TargetMetadata, drafter: SpeculativeDraftRunner
) -> TreePolicy:
    """The policy ``settings`` ask for on ``target`` with ``drafter``: ``auto`` weighs a
    plain decode, the drafter's offers and the model shapes it can grow; a fixed shape (or
    a policy given as such) is itself, or, for a drafter that also offers (prompt lookup
    beside a model) and a shape, weighed against the offers."""
    widths = target.verify_widths
    if not isinstance(settings, TreeSettings):
        if isinstance(settings, TreeShape) and settings.cost.max_nodes:
            return _against_offers(settings, widths, drafter)
        return settings
    if settings.mode == "auto":
        shapes = auto_candidates(target, drafter.branching) if drafter.has_model else []
        return Dispatcher(shapes, widths, decode=True, lookup=drafter.offers)
    return _against_offers(fixed_shape(settings, target), widths, drafter)


def _against_offers(
    shape: TreeShape, widths: tuple[int, ...], drafter: SpeculativeDraftRunner
) -> TreePolicy:
    if drafter.offers and drafter.has_model:
        return Dispatcher([shape], widths, decode=False, lookup=True)
    return shape
