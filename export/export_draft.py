"""Export an EAGLE-3 draft checkpoint to a draft ``.pte`` paired with a target artifact.

What the program holds is built by ``models/build.py`` (the eager reference builds it there
too); this module checks the options, the pair and the output location and lowers it.
"""

from __future__ import annotations

from pathlib import Path

from etspec.artifact import open_artifact
from etspec.contract import DraftMetadata, TargetMetadata
from etspec.export.lowering import check_options, lower_to_file
from etspec.files import check_output
from etspec.models.build import (
    DraftExportOptions,
    build_draft,
    draft_program,
    target_embedding,
)
from etspec.progress import Progress

__all__ = ["DraftExportOptions", "build_draft", "export_draft"]


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
    check_options(opts.backend, opts.dtype)
    opts.check()
    out = check_output(output, force, inputs=(draft_checkpoint, target_pte, target_checkpoint))
    target = open_artifact(target_pte, expect="target").metadata
    assert isinstance(target, TargetMetadata)
    with Progress(f"export draft -> {out.name}") as progress:
        progress.stage(f"read {Path(draft_checkpoint).name}")
        embedding = target_embedding(target_checkpoint)
        build = draft_program(draft_checkpoint, target, opts, embedding, progress.stage)
        meta = build.meta
        assert isinstance(meta, DraftMetadata)
        lower_to_file(
            build.methods,
            {**meta.constant_methods(), **build.constants},
            opts.backend,
            progress,
            path=out,
            quantized=build.quantized,
            replace=force,
        )
    return meta
