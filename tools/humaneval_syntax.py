"""Acceptance check of the bundled target: are its HumanEval completions plausible Python?

Reads an ``etspec bench --json`` report (greedy, HumanEval prompts), cuts every target-only
completion at the first top-level ``def``/``class`` line (the function is complete there),
and counts the completions that ``ast.parse`` accepts together with their prompt, and
apart from them the empty ones (no code before the next top-level definition).

    python -m etspec.tools.humaneval_syntax bench.json [--system target-only]
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import click

from etspec.tools.prompts import humaneval_prompts

# A line starting at column 0; the completion's first line continues the prompt's last one.
BOUNDARY = re.compile(r"\n(def|class|async def)\s")


def truncate(completion: str) -> str:
    """The completion up to (not including) its first top-level def/class line."""
    m = BOUNDARY.search(completion)
    return completion[: m.start() + 1] if m else completion


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


@click.command()
@click.argument("report", type=click.Path(path_type=Path, exists=True))
@click.option("--system", default="target-only", show_default=True)
def main(report: Path, system: str) -> None:
    records = json.loads(report.read_text())["records"][system]
    prompts = {p.id: p.text for p in humaneval_prompts()}
    bodies = [truncate(r["text"]) for r in records]
    ok = [parses(prompts[r["prompt_id"]] + b) for r, b in zip(records, bodies, strict=True)]
    # A completion that opens a new top-level def at once truncates to nothing, and a
    # prompt with an empty body still parses: count those apart so they cannot pass as code.
    empty = [not b.strip() for b in bodies]
    click.echo(
        json.dumps(
            {
                "system": system,
                "completions": len(records),
                "parse": sum(ok),
                "fraction": round(sum(ok) / len(records), 4),
                "empty": sum(empty),
                "parse_with_code": sum(o and not e for o, e in zip(ok, empty, strict=True)),
            }
        )
    )


if __name__ == "__main__":
    main()
