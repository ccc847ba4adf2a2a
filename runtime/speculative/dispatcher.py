"""The tree-budget dispatcher (``--tree auto``) and the ``--tree`` settings.

Like Meta's tree dispatcher and EAGLE's ``total_token=-1`` sweep, ``AutoTree`` picks the
shape that emits the most tokens per second on this artifact and this machine:

- Costs are measured, not assumed: at its first step it times ``target_verify`` at every
  compiled width, ``draft_step`` and ``draft_extend`` (on scratch slots, which hold nothing
  between steps), giving each candidate a predicted step time.
- Acceptance is observed: each candidate is probed for a few steps (in order of its
  optimistic bound: every draft token accepted), and a candidate whose optimistic bound is
  below the best measured throughput is never probed at all.
- After probing it runs the candidate with the best measured tokens/s (tokens emitted over
  wall time of its steps, everything included), and keeps measuring what it runs.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from etspec.contract import DRAFT_EXTEND, DRAFT_STEP, MASK_MIN, DraftMetadata, TargetMetadata
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.shapes import ChainShape, TreePolicy, TreeShape
from etspec.runtime.speculative.static_tree import StaticTree

TREE_MODES = ("chain", "static", "dynamic", "auto")


@dataclass
class StepCosts:
    """Measured seconds per call of the methods one speculative step runs."""

    verify_s: dict[int, float]  # per compiled verify width
    draft_step_s: float = 0.0
    draft_extend_s: float = 0.0
    step_width: int = 1

    def predict(self, shape: TreeShape, widths: tuple[int, ...]) -> float:
        cost = shape.cost
        width = next(w for w in widths if w >= cost.max_nodes + 1)
        calls = max(cost.levels, math.ceil(cost.fed_nodes / max(self.step_width, 1)))
        return self.verify_s[width] + calls * self.draft_step_s + self.draft_extend_s


def measure_costs(target: Program, draft: Program | None = None, repeats: int = 5) -> StepCosts:
    """Median wall time of each verify width, draft step and draft extend, run on scratch
    slots only (nothing committed is touched)."""
    meta = target.metadata
    assert isinstance(meta, TargetMetadata)

    def timed(method: str, *inputs: torch.Tensor) -> float:
        target_or_draft = draft if method.startswith("draft") else target
        assert target_or_draft is not None
        target_or_draft.run(method, *inputs)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            target_or_draft.run(method, *inputs)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def scratch_inputs(width: int, m_ctx: int, cache: int) -> tuple[torch.Tensor, ...]:
        rows = torch.arange(width)
        slots = m_ctx + rows
        mask = torch.full((width, cache), MASK_MIN)
        mask[rows, slots] = 0.0
        return rows % 2, rows, slots, mask

    costs = StepCosts(
        {
            w: timed(meta.verify_method(w), *scratch_inputs(w, meta.max_context, meta.cache_size))
            for w in meta.verify_widths
        }
    )
    if draft is not None:
        dm = draft.metadata
        assert isinstance(dm, DraftMetadata)
        tok, pos, slots, mask = scratch_inputs(dm.step_width, dm.max_context, dm.cache_size)
        costs.step_width = dm.step_width
        costs.draft_step_s = timed(
            DRAFT_STEP, tok, torch.zeros(dm.step_width, dm.hidden_size), pos, slots, mask
        )
        e = dm.extend_width
        tok, pos, slots, mask = scratch_inputs(e, dm.max_context, dm.cache_size)
        width = dm.target_hidden_size * len(dm.hidden_state_layers)
        costs.draft_extend_s = timed(DRAFT_EXTEND, tok, torch.zeros(e, width), pos, slots, mask)
    return costs


@dataclass
class _Record:
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class AutoTree(TreePolicy):
    """Chooses among ``shapes`` by measured cost and observed acceptance (module docstring)."""

    shapes: list[TreeShape]
    widths: tuple[int, ...]
    calibrate: Callable[[], StepCosts] | None = None
    probe_steps: int = 8
    costs: StepCosts | None = None
    records: dict[str, _Record] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.shapes:
            raise EtspecError("--tree auto has no candidate shape for this artifact")
        self.records = {s.name: _Record() for s in self.shapes}

    def candidates(self) -> list[TreeShape]:
        return list(self.shapes)

    def optimistic_rate(self, shape: TreeShape) -> float:
        """Tokens/s if every draft token were accepted, from measured costs."""
        if self.costs is None:
            return math.inf
        return (shape.cost.max_height + 1) / self.costs.predict(shape, self.widths)

    def choose(self) -> TreeShape:
        if self.costs is None and self.calibrate is not None:
            self.costs = self.calibrate()
        probed = [s for s in self.shapes if self.records[s.name].steps >= self.probe_steps]
        best = max((self.records[s.name].rate for s in probed), default=0.0)
        pending = [
            s
            for s in self.shapes
            if self.records[s.name].steps < self.probe_steps and self.optimistic_rate(s) > best
        ]
        if pending:
            return max(pending, key=self.optimistic_rate)
        return max(probed, key=lambda s: self.records[s.name].rate)

    def observe(self, shape: TreeShape, emitted: int, seconds: float) -> None:
        rec = self.records[shape.name]
        rec.steps += 1
        rec.tokens += emitted
        rec.seconds += seconds

    def report(self) -> dict[str, dict[str, float]]:
        """Per candidate: steps run, measured tokens/s and predicted step seconds."""
        out = {}
        for s in self.shapes:
            rec = self.records[s.name]
            out[s.name] = {
                "steps": rec.steps,
                "tokens_per_s": rec.rate,
                "predicted_step_s": self.costs.predict(s, self.widths) if self.costs else 0.0,
            }
        return out


def shape_by_name(name: str) -> TreeShape:
    """A fixed shape from the name stats and ``AutoTree.report()`` give it: ``chain3``,
    ``dynamic-d3k4t16``, or a static tree (``N7``, ``D3xBF2``)."""
    chain = re.fullmatch(r"chain(\d+)", name)
    if chain:
        return ChainShape(int(chain.group(1)))
    dynamic = re.fullmatch(r"dynamic-d(\d+)k(\d+)t(\d+)", name)
    if dynamic:
        depth, topk, total = (int(g) for g in dynamic.groups())
        return DynamicTree(depth=depth, topk=topk, total_tokens=total)
    return StaticTree.parse(name)


def default_dynamic(width: int, topk: int = 4) -> DynamicTree:
    """A dynamic tree filling a verify width: deeper for wider budgets (depth 2..5)."""
    depth = min(5, max(2, width.bit_length() - 2))
    return DynamicTree(depth=depth, topk=topk, total_tokens=width)


def auto_candidates(target: TargetMetadata, branching: bool) -> list[TreeShape]:
    """Chains for every verify width and, for drafts that can branch, static and dynamic
    trees filling each width."""
    shapes: dict[str, TreeShape] = {}
    for w in target.verify_widths:
        if w >= 2:
            chain = ChainShape(min(w - 1, 7))
            shapes.setdefault(chain.name, chain)
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
    num_spec_tokens: int = 3  # chain length
    static_tree: str | None = None  # D3xBF2 / N8 / JSON choices (default: N fills K - 1)
    depth: int | None = None  # dynamic: expansion passes (EAGLE repo); default from K
    topk: int | None = None
    total_tokens: int | None = None  # dynamic: nodes incl. the root; default K

    def policy(
        self,
        target: TargetMetadata,
        branching: bool,
        calibrate: Callable[[], StepCosts] | None = None,
    ) -> TreePolicy:
        if self.mode not in TREE_MODES:
            raise EtspecError(
                f"unknown --tree {self.mode!r}; choose one of {', '.join(TREE_MODES)}"
            )
        if self.mode == "chain":
            return ChainShape(self.num_spec_tokens)
        if self.mode == "static":
            if self.static_tree is None:
                return StaticTree.pruned(max(1, min(target.verify_width - 1, 15)))
            return StaticTree.parse(self.static_tree)
        if self.mode == "dynamic":
            base = default_dynamic(target.verify_width)
            return DynamicTree(
                depth=base.depth if self.depth is None else self.depth,
                topk=base.topk if self.topk is None else self.topk,
                total_tokens=base.total_tokens if self.total_tokens is None else self.total_tokens,
            )
        return AutoTree(auto_candidates(target, branching), target.verify_widths, calibrate)
