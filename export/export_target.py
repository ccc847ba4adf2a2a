"""Export a local Hugging Face target checkpoint to a multi-method target ``.pte``.

What the program holds is built by ``models/build.py`` (the eager reference builds it there
too); this module checks the options and the output location and lowers it.
"""

from __future__ import annotations

from pathlib import Path

from etspec.contract import CHAT_TEMPLATE, TOKENIZER_JSON, TargetMetadata
from etspec.export.lowering import as_uint8, check_options, lower_to_file
from etspec.files import check_output
from etspec.models.build import (
    TargetExportOptions,
    build_assistant,
    build_target,
    check_tokenizer,
    default_context,
    target_metadata,
    target_program,
    tied_embedding,
)
from etspec.models.gguf import checkpoint_folder
from etspec.progress import Progress

__all__ = [
    "TargetExportOptions",
    "build_assistant",
    "build_target",
    "check_tokenizer",
    "default_context",
    "export_target",
    "target_metadata",
    "tied_embedding",
]


def export_target(
    checkpoint: str | Path,
    output: str | Path,
    opts: TargetExportOptions | None = None,
    force: bool = False,
) -> TargetMetadata:
    """Export ``checkpoint`` (a Hugging Face folder or a ``.gguf`` file) to ``output``;
    returns the metadata written into the artifact."""
    opts = opts or TargetExportOptions()
    check_options(opts.backend, opts.dtype)
    opts.check()
    out = check_output(output, force, inputs=(checkpoint, opts.assistant))
    with Progress(f"export target -> {out.name}") as progress:
        progress.stage(f"read {Path(checkpoint).name}")
        with checkpoint_folder(checkpoint) as folder:
            build = target_program(folder, opts, progress.stage)
        meta = build.meta
        assert isinstance(meta, TargetMetadata)
        constants = meta.constant_methods()
        for name in (TOKENIZER_JSON, CHAT_TEMPLATE):  # the text the runtimes read
            if name in build.constants:
                constants[name] = as_uint8(build.constants[name])
        lower_to_file(
            build.methods,
            constants,
            opts.backend,
            progress,
            path=out,
            keep_out=build.keep_out,
            quantized=build.quantized,
            replace=force,
        )
    return meta
