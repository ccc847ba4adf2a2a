"""Acceptance check of the bundled target: are its HumanEval completions plausible Python?

Reads an ``etspec bench --json`` report (greedy, HumanEval prompts), cuts every target-only
completion at the first top-level ``def``/``class`` line (the function is complete there),
and counts the completions that ``ast.parse`` accepts together with their prompt.

    python scripts/humaneval_syntax.py bench.json [--system target-only]
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import click

from etspec.runtime.bench import humaneval_prompts

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
    ok = sum(parses(prompts[r["prompt_id"]] + truncate(r["text"])) for r in records)
    click.echo(
        json.dumps(
            {
                "system": system,
                "completions": len(records),
                "parse": ok,
                "fraction": round(ok / len(records), 4),
            }
        )
    )


if __name__ == "__main__":
    main()
