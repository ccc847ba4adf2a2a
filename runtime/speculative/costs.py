"""What one speculative step costs on this machine, measured (``--tree auto``'s cost model).

The target's verify widths are timed here; each draft runner times its own calls
(``SpeculativeDraftRunner.step_costs``) with the probe this module hands it, so a new drafter
brings its own cost probes and nothing here names one.
"""

from __future__ import annotations

import torch

from etspec.contract import (
    TARGET_COMMIT,
    TARGET_DECODE,
    TargetMetadata,
)
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.step import CostProbe, DraftCosts, StepCosts


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
