"""What one speculative step costs on this machine, measured (``--tree auto``'s cost model).

The target's verify widths are timed here; each draft runner times its own calls
(``SpeculativeDraftRunner.step_costs``) with the probe this module hands it, so a new drafter
brings its own cost probes and nothing here names one.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch

from etspec.contract import (
    AUTO_SEEDED_DRAFT_CALL,
    AUTO_SEEDED_VERIFY_BASE,
    AUTO_SEEDED_VERIFY_PER_ROW,
    MASK_MIN,
    TARGET_COMMIT,
    TARGET_DECODE,
    TargetMetadata,
)
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.speculative.draft_runner import DraftCosts, SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape


@dataclass
class StepCosts:
    """Measured seconds per call of the methods one speculative step runs."""

    verify_s: dict[int, float]  # per compiled verify width
    draft_step_s: float = 0.0
    draft_extend_s: float = 0.0
    step_width: int = 1
    decode_s: float = 0.0  # one target_decode (a step that drafts nothing)

    def predict(self, shape: TreeShape, widths: tuple[int, ...]) -> float:
        cost = shape.cost
        if cost.max_nodes == 0:  # nothing to verify: a decode (the draft still follows)
            # Untimed (no position to probe at), a decode costs at most the narrowest verify.
            decode = self.decode_s or self.verify_s[min(widths)]
            return decode + self.draft_extend_s
        width = next(w for w in widths if w >= cost.max_nodes + 1)
        calls = max(cost.levels, math.ceil(cost.fed_nodes / max(self.step_width, 1)))
        return self.verify_s[width] + calls * self.draft_step_s + self.draft_extend_s


def fixed_costs(widths: tuple[int, ...]) -> StepCosts:
    """The timing-free costs of a seeded sampling request under ``--tree auto``
    (``contract.AUTO_SEEDED_*``): every level one draft call, whatever the step width."""
    return StepCosts(
        {w: AUTO_SEEDED_VERIFY_BASE + AUTO_SEEDED_VERIFY_PER_ROW * w for w in widths},
        AUTO_SEEDED_DRAFT_CALL,
        AUTO_SEEDED_DRAFT_CALL,
        step_width=max(widths),
        decode_s=AUTO_SEEDED_VERIFY_BASE + AUTO_SEEDED_VERIFY_PER_ROW,
    )


@dataclass(frozen=True)
class CostProbe:
    """Times program calls on scratch slots only (nothing committed is touched), with masks
    as wide as a ``context``-token context needs (a call's cost grows with the context)."""

    repeats: int = 5
    context: int = 256

    def timed(self, program: Program, method: str, *inputs: torch.Tensor) -> float:
        """Median wall time of ``method`` after one warm-up call."""
        program.run(method, *inputs)  # warm-up
        times = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            program.run(method, *inputs)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def scratch_inputs(self, width: int, layout: MaskLayout) -> tuple[torch.Tensor, ...]:
        """(tokens, positions, slots, mask, *band) of ``width`` rows in scratch slots."""
        rows = torch.arange(width)
        slots = layout.max_context + rows
        columns = layout.width(min(self.context, layout.max_context))
        mask = torch.full((width, columns), MASK_MIN)
        mask[rows, layout.column_of(slots, columns)] = 0.0
        return rows % 2, rows, slots, mask, *layout.band(0, columns)

    def decode_inputs(self, position: int, layout: MaskLayout) -> tuple[torch.Tensor, ...]:
        """(token, position, mask, *band) of a decode at ``position``, the next slot to be
        committed (so nothing committed is touched: the next step writes it again), with a
        mask as wide as the scratch probes' but showing only its own slot."""
        columns = layout.width(max(position + 1, min(self.context, layout.max_context)))
        mask = torch.full((1, columns), MASK_MIN)
        mask[0, position] = 0.0
        return torch.tensor([1]), torch.tensor([position]), mask, *layout.band(position, columns)


def measure_costs(
    target: Program,
    draft: SpeculativeDraftRunner | None = None,
    probe: CostProbe | None = None,
    position: int | None = None,
) -> StepCosts:
    """Median wall time of each verify width, of a decode at ``position`` (the next slot to
    be committed; not timed without one) and of the draft runner's own calls."""
    probe = probe or CostProbe()
    meta = target.metadata
    assert isinstance(meta, TargetMetadata)
    layout = MaskLayout.of(meta)
    costs = StepCosts(
        {
            w: probe.timed(target, meta.verify_method(w), *probe.scratch_inputs(w, layout))
            for w in meta.verify_widths
        }
    )
    if position is not None and position < meta.max_context:
        costs.decode_s = probe.timed(target, TARGET_DECODE, *probe.decode_inputs(position, layout))
    # Load the commit too (copying scratch slots onto themselves): a tree's first commit
    # must not pay the method load inside a timed step.
    scratch = meta.max_context + torch.arange(meta.verify_width)
    target.run(TARGET_COMMIT, scratch, scratch)
    drafted = draft.step_costs(probe) if draft is not None else DraftCosts()
    costs.step_width = drafted.step_width
    costs.draft_step_s, costs.draft_extend_s = drafted.step_s, drafted.extend_s
    return costs
