"""The ``etspec`` command line: export, inspect (generation commands arrive with the runtime).

User-caused errors (``EtspecError``) print one line and exit 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from etspec.errors import EtspecError

F = TypeVar("F", bound=Callable[..., Any])


def _quiet_third_party() -> None:
    # torchao and ExecuTorch print load-time chatter (optional CUDA kernels, cpuinfo probes)
    # that says nothing about the user's command.
    # torch.export's deprecation chatter is about its internals, not the user's model.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("torchao", "torch.utils._pytree", "torch._export"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EtspecError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


@click.group()
@click.version_option(package_name="etspec")
def main() -> None:
    """Lossless speculative decoding on ExecuTorch: export a .pte pair, run it, measure it."""
    _quiet_third_party()


@main.group()
def export() -> None:
    """Export a checkpoint to a .pte artifact."""


def _parse_layers(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated layer indices, got {value!r}") from None


_backend = click.option(
    "--backend", type=click.Choice(["xnnpack", "portable"]), default="xnnpack", show_default=True
)
_dtype = click.option(
    "--dtype", type=click.Choice(["fp32", "8da4w"]), default="fp32", show_default=True
)
_force = click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")


@export.command("target")
@click.argument("checkpoint_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@_backend
@_dtype
@click.option("--max-seq", default=512, show_default=True, help="Maximum context (tokens).")
@click.option("--prefill-chunk", default=32, show_default=True, help="Compiled prefill width.")
@click.option("--verify-width", default=8, show_default=True, help="Compiled verify width K.")
@click.option(
    "--hidden-layers",
    default=None,
    help="Comma-separated layers whose inputs are exported (default: 2,L//2,L-3).",
)
@_force
@user_errors
def export_target_cmd(
    checkpoint_dir: Path,
    output: Path,
    backend: str,
    dtype: str,
    max_seq: int,
    prefill_chunk: int,
    verify_width: int,
    hidden_layers: str | None,
    force: bool,
) -> None:
    """Export a Hugging Face target checkpoint folder to a target .pte."""
    from etspec.export.export_target import TargetExportOptions, export_target

    opts = TargetExportOptions(
        backend=backend,
        dtype=dtype,
        max_seq=max_seq,
        prefill_chunk=prefill_chunk,
        verify_width=verify_width,
        hidden_layers=_parse_layers(hidden_layers),
    )
    meta = export_target(checkpoint_dir, output, opts, force=force)
    click.echo(f"wrote {output} ({meta.model_family}, {meta.num_layers} layers, {backend}/{dtype})")


@export.command("draft")
@click.argument("draft_dir", type=click.Path(path_type=Path))
@click.option("--target", "target_pte", required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option(
    "--target-checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Target checkpoint, for drafts that ship no embed_tokens.weight.",
)
@_backend
@_dtype
@click.option("--step-width", default=4, show_default=True, help="Nodes drafted per call.")
@_force
@user_errors
def export_draft_cmd(
    draft_dir: Path,
    target_pte: Path,
    output: Path,
    target_checkpoint: Path | None,
    backend: str,
    dtype: str,
    step_width: int,
    force: bool,
) -> None:
    """Export an EAGLE-3 draft checkpoint folder to a draft .pte for TARGET."""
    from etspec.export.export_draft import DraftExportOptions, export_draft

    opts = DraftExportOptions(backend=backend, dtype=dtype, step_width=step_width)
    meta = export_draft(draft_dir, target_pte, output, opts, target_checkpoint, force=force)
    click.echo(f"wrote {output} (eagle3, draft vocab {meta.draft_vocab_size}, {backend}/{dtype})")


@main.command()
@click.argument("pte", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@user_errors
def inspect(pte: Path, as_json: bool) -> None:
    """Print the methods and etspec metadata of a .pte artifact."""
    from etspec.artifact import open_artifact

    art = open_artifact(pte)
    methods = sorted(art.program.method_names)
    meta = art.metadata.constant_methods()
    info = {
        "path": str(pte),
        "size_bytes": pte.stat().st_size,
        "methods": methods,
        "metadata": meta,
        "has_tokenizer": art.tokenizer_json() is not None,
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"{pte}  ({info['size_bytes'] / 1e6:.2f} MB, etspec {art.kind})")
    click.echo("methods: " + ", ".join(m for m in methods if m not in meta))
    click.echo("metadata:")
    for key, value in meta.items():
        click.echo(f"  {key}: {value}")
    click.echo(f"  tokenizer: {'embedded' if info['has_tokenizer'] else 'none'}")
