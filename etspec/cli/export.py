"""``etspec export target|draft``, ``etspec convert gguf`` and ``etspec inspect``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from etspec.cli.app import (
    backend_option,
    default_dtype,
    draft_dtype_option,
    dtype_option,
    force_option,
    main,
    one_line,
    option,
    user_errors,
    verbose_option,
)
from etspec.cli.runner_options import no_weight_cache_option, widths
from etspec.contract import DEFAULT_MAX_SEQ, DEFAULT_VERIFY_WIDTHS
from etspec.errors import EtspecError


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


@export.command("target")
@click.argument("checkpoint_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path())
@backend_option
@dtype_option
@option(
    "--max-seq",
    type=click.IntRange(min=1),
    default=None,
    help="Maximum context (tokens) [default: the checkpoint's trained context, at most "
    f"{DEFAULT_MAX_SEQ}; KV memory grows with it, speed does not].",
)
@click.option("--prefill-chunk", default=32, show_default=True, help="Compiled prefill width.")
@click.option(
    "--verify-width",
    default=None,
    help="Compiled verify widths (one target_verify method each; the widest bounds trees) "
    f"[default: {','.join(map(str, DEFAULT_VERIFY_WIDTHS))}, each cut to the model's sliding "
    "window and context].",
)
@click.option(
    "--hidden-layers",
    default=None,
    help="Comma-separated layers whose inputs are exported (default: 2,L//2,L-3).",
)
@click.option(
    "--assistant",
    type=click.Path(path_type=Path),
    default=None,
    help="A Gemma 4 assistant checkpoint to export into the target (it reads its caches); "
    "generate with --draft-method gemma4-assistant.",
)
@click.option(
    "--assistant-step-width", default=4, show_default=True, help="Rows of one assistant call."
)
@force_option
@verbose_option
@user_errors
def export_target_cmd(
    checkpoint_dir: Path,
    output: str,
    backend: str,
    dtype: str,
    max_seq: int | None,
    prefill_chunk: int,
    verify_width: str | None,
    hidden_layers: str | None,
    assistant: Path | None,
    assistant_step_width: int,
    force: bool,
) -> None:
    """Export a Hugging Face target checkpoint folder (or a GGUF file) to a target .pte."""
    from etspec.export.export_target import TargetExportOptions, export_target

    dtype = default_dtype(dtype, backend)
    opts = TargetExportOptions(
        backend=backend,
        dtype=dtype,
        max_seq=max_seq,
        prefill_chunk=prefill_chunk,
        verify_width=max(widths(verify_width)) if verify_width else None,
        narrow_verify_widths=widths(verify_width) if verify_width else (),
        hidden_layers=_parse_layers(hidden_layers),
        assistant=assistant,
        assistant_step_width=assistant_step_width,
    )
    meta = export_target(checkpoint_dir, output, opts, force=force)
    click.echo(f"wrote {output} ({meta.model_family}, {meta.num_layers} layers, {backend}/{dtype})")


@export.command("draft")
@click.argument("draft_dir", type=click.Path(path_type=Path))
@click.option("--target", "target_pte", required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path())
@click.option(
    "--target-checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Target checkpoint, for drafts that ship no embed_tokens.weight.",
)
@backend_option
@draft_dtype_option
@click.option("--step-width", default=4, show_default=True, help="Nodes drafted per call.")
@click.option(
    "--scratch",
    default=64,
    show_default=True,
    help="Draft cache slots for tree nodes (a dynamic tree feeds depth x topk).",
)
@force_option
@verbose_option
@user_errors
def export_draft_cmd(
    draft_dir: Path,
    target_pte: Path,
    output: str,
    target_checkpoint: Path | None,
    backend: str,
    dtype: str,
    step_width: int,
    scratch: int,
    force: bool,
) -> None:
    """Export an EAGLE-3 draft checkpoint folder to a draft .pte for TARGET."""
    from etspec.export.export_draft import DraftExportOptions, export_draft

    opts = DraftExportOptions(backend=backend, dtype=dtype, step_width=step_width, scratch=scratch)
    meta = export_draft(draft_dir, target_pte, output, opts, target_checkpoint, force=force)
    click.echo(f"wrote {output} (eagle3, draft vocab {meta.draft_vocab_size}, {backend}/{dtype})")


@main.group()
def convert() -> None:
    """Convert other checkpoint formats to a Hugging Face folder etspec exports."""


@convert.command("gguf")
@click.argument("gguf_file", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path())
@force_option
@verbose_option
@user_errors
def convert_gguf_cmd(gguf_file: Path, output: str, force: bool) -> None:
    """Write a llama.cpp GGUF file (gemma3, llama, qwen2) as config.json, model.safetensors
    (fp32, dequantized), tokenizer.json and tokenizer_config.json. `etspec export target
    FILE.gguf` reads GGUF directly; the folder is for tools that want one (transformers,
    scripts/train_draft.py)."""
    from etspec.models.gguf import CONVERTED_FILES, convert_gguf

    out = convert_gguf(gguf_file, output, force=force)
    click.echo(f"wrote {out}/ ({', '.join(sorted(CONVERTED_FILES))})")


@main.command()
@click.argument("pte", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--memory",
    is_flag=True,
    help="Also load every method and report the resident memory each one adds.",
)
@no_weight_cache_option
@verbose_option
@user_errors
def inspect(pte: Path, as_json: bool, memory: bool, no_weight_cache: bool) -> None:
    """Print the methods and etspec metadata of a .pte artifact."""
    from etspec import openvino
    from etspec.artifact import open_artifact
    from etspec.tools.memory import loaded_memory

    art = open_artifact(pte)
    methods = sorted(art.program.method_names)
    meta = art.metadata.constant_methods()
    info: dict[str, Any] = {
        "path": str(pte),
        "size_bytes": pte.stat().st_size,
        "methods": methods,
        "metadata": meta,
        "has_tokenizer": art.tokenizer_json() is not None,
        "chat_template": None,
        "problems": art.problems(),
    }
    chat = art.chat_template()
    if chat is not None:  # what `generate --messages` and `chat` render with
        from etspec.runtime.chat import ChatTemplate

        try:
            template = ChatTemplate.from_json(chat)
            info["chat_template"] = template.template
            template.compiled  # noqa: B018  # its syntax, as a load would find it
        except EtspecError as e:
            info["problems"].append(str(e))
    if memory:
        openvino.prepare(art.metadata, str(pte))  # its precision changes what it holds
        del art  # measure a fresh load, not one sharing this one's pages
        steps = loaded_memory(pte, weight_cache=False if no_weight_cache else None)
        info["memory"] = {
            "file_bytes": info["size_bytes"],
            "kv_cache_bytes": meta["kv_cache_bytes"],
            "loaded_bytes": sum(steps.values()),
            "loaded_vs_weights_and_kv": sum(steps.values())
            / (info["size_bytes"] + meta["kv_cache_bytes"]),
            "load_steps_bytes": steps,
        }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        _exit_on_problems(info["problems"], quiet=True)
        return
    kind = meta["artifact_kind"]
    click.echo(f"{pte}  ({info['size_bytes'] / 1e6:.2f} MB, etspec {kind})")
    click.echo("methods: " + ", ".join(m for m in methods if m not in meta))
    click.echo("metadata:")
    for key, value in meta.items():
        click.echo(f"  {key}: {value}")
    click.echo(f"  tokenizer: {'embedded' if info['has_tokenizer'] else 'none'}")
    template = info["chat_template"]
    shown = f"{len(template)} characters (--json shows it)" if template else "none"
    click.echo(f"  chat template: {shown}")
    if kind == "target":
        click.echo(_layer_summary(meta))
    if memory:
        mem = info["memory"]
        stored = mem["file_bytes"] + mem["kv_cache_bytes"]
        click.echo(
            f"memory: file {mem['file_bytes'] / 1e6:.1f} MB, KV cache "
            f"{mem['kv_cache_bytes'] / 1e6:.1f} MB, resident after loading every method "
            f"{mem['loaded_bytes'] / 1e6:.1f} MB ({mem['loaded_bytes'] / stored:.2f}x the "
            "weights as stored + KV cache):"
        )
        for name, size in mem["load_steps_bytes"].items():
            if name not in meta and size > 0:
                click.echo(f"  {name}: +{size / 1e6:.1f} MB")
    _exit_on_problems(info["problems"], quiet=False)


def _exit_on_problems(problems: list[str], quiet: bool) -> None:
    """An artifact that would fail when used: each problem as an ``error:`` line (unless
    the JSON already holds them), exit 1 so scripts notice."""
    if not problems:
        return
    if not quiet:
        for problem in problems:
            click.echo(f"error: {one_line(problem)}", err=True)
    sys.exit(1)


def _layer_summary(meta: dict[str, Any]) -> str:
    """``layers: 5 (3 sliding-window of 12 keys, 2 full attention); KV cache ...``."""
    types = str(meta["layer_types"]).split(",")
    sliding = types.count("sliding")
    kinds = f"{len(types) - sliding} full attention"
    if sliding:
        kinds = f"{sliding} sliding-window of {meta['sliding_window']} keys, {kinds}"
    summary = (
        f"layers: {len(types)} ({kinds}); KV cache {meta['kv_cache_bytes'] / 1e6:.2f} MB for "
        f"{meta['cache_size']} slots"
    )
    if meta.get("assistant"):
        summary += (
            f"; drafter inside: {meta['assistant']} ({meta['assistant_step_width']} rows per "
            "call, --draft-method gemma4-assistant)"
        )
    return summary
