"""Export an EAGLE-3 draft checkpoint to a draft ``.pte`` paired with a target artifact."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from etspec.artifact import open_artifact
from etspec.contract import (
    DRAFT_D2T,
    DraftMetadata,
    TargetMetadata,
    check_pair,
)
from etspec.errors import ExportError, MetadataMismatchError
from etspec.export.lowering import check_options, check_output, lower_to_file
from etspec.models.checkpoint import load_state_dict
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.methods import draft_methods
from etspec.models.quantize import quantize


@dataclass(frozen=True)
class DraftExportOptions:
    backend: str = "xnnpack"
    dtype: str = "fp32"
    step_width: int = 4  # nodes drafted per call (tree top-k; 1 is a chain)
    scratch: int = 64  # draft slots for tree nodes beyond the committed context

    def check(self) -> None:
        check_options(self.backend, self.dtype)
        if self.step_width < 1 or self.scratch < self.step_width:
            raise ExportError("--step-width must be >= 1 and --scratch >= --step-width")


def _target_embedding(target_checkpoint: str | Path | None) -> torch.Tensor | None:
    if target_checkpoint is None:
        return None
    state = load_state_dict(target_checkpoint)
    for key in ("model.embed_tokens.weight", "embed_tokens.weight"):
        if key in state:
            return state[key]
    raise ExportError(f"{target_checkpoint}: no embed_tokens.weight in the target checkpoint")


def build_draft(
    draft_checkpoint: str | Path,
    target: TargetMetadata,
    opts: DraftExportOptions,
    target_checkpoint: str | Path | None = None,
) -> Eagle3Draft:
    """The exportable draft module, sized for ``target``'s context and verify width."""
    # The draft needs room for the prompt and for every tree node drafted in one step.
    scratch = max(opts.scratch, target.verify_width, target.prefill_chunk)
    return Eagle3Draft.from_checkpoint(
        draft_checkpoint, target.max_context, scratch, _target_embedding(target_checkpoint)
    )


def draft_metadata(
    model: Eagle3Draft, target: TargetMetadata, opts: DraftExportOptions
) -> DraftMetadata:
    return model.metadata(
        target, step_width=opts.step_width, dtype=opts.dtype, backend=opts.backend
    )


def export_draft(
    draft_checkpoint: str | Path,
    target_pte: str | Path,
    output: str | Path,
    opts: DraftExportOptions | None = None,
    target_checkpoint: str | Path | None = None,
    force: bool = False,
) -> DraftMetadata:
    """Export the draft for the target artifact ``target_pte``; refuses a mismatched pair."""
    opts = opts or DraftExportOptions()
    opts.check()
    out = check_output(output, force)
    target = open_artifact(target_pte, expect="target").metadata
    assert isinstance(target, TargetMetadata)
    model = build_draft(draft_checkpoint, target, opts, target_checkpoint)
    if model.cfg.num_aux != len(target.hidden_state_layers):
        raise MetadataMismatchError(
            f"draft/target mismatch: the draft fuses {model.cfg.num_aux} target states, the "
            f"target exports {len(target.hidden_state_layers)}; re-export the target with "
            "matching --hidden-layers"
        )
    meta = draft_metadata(model, target, opts)
    check_pair(target, meta)
    quantize(model, opts.dtype)
    constants = meta.constant_methods()
    constants[DRAFT_D2T] = model.d2t.clone()
    lower_to_file(
        draft_methods(model, target.prefill_chunk, target.verify_widths, opts.step_width),
        constants,
        opts.backend,
        desc=f"export draft -> {out.name}",
        path=out,
        quantized=opts.dtype != "fp32",
    )
    return meta
