"""How a measurement script hands over its report: JSON on stdout, and in a file if asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


def emit_report(report: dict[str, Any], json_out: str | Path | None) -> None:
    """Print ``report`` as indented JSON and, with ``json_out``, write the same text there."""
    text = json.dumps(report, indent=2)
    click.echo(text)
    if json_out is not None:
        Path(json_out).write_text(text + "\n")
