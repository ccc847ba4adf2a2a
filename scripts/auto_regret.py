"""How close ``--tree auto`` came to the best fixed shape, per ``etspec bench`` run.

Reads bench JSON files (``etspec bench --trees auto,chain3,chain5,chain7,N7 --json F``) and
reports, per run and per runtime (Python, ``cpp``): auto's mean speedup, the best fixed
shape's, their ratio (issue 26 asks >= 0.95 on every run) and the shapes auto ran most.

    python scripts/auto_regret.py RUN1.json RUN2.json RUN3.json \
        [--json OUT]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

FIXED_EXCLUDED = ("target-only", "auto")


def regret(summary: dict[str, Any], prefix: str = "") -> dict[str, Any] | None:
    """Auto against the best fixed shape among the systems named ``prefix + shape``."""
    auto = summary.get(f"{prefix}auto")
    fixed = {
        name: s["speedup"]["mean"]
        for name, s in summary.items()
        if name.startswith(prefix)
        and name.removeprefix(prefix) not in FIXED_EXCLUDED
        and (prefix or not name.startswith("cpp "))
        and "speedup" in s
    }
    if auto is None or not fixed:
        return None
    best = max(fixed, key=fixed.__getitem__)
    steps = {k: v["steps"] for k, v in (auto.get("auto_report") or {}).items() if v["steps"]}
    return {
        "auto_speedup": auto["speedup"]["mean"],
        "best_fixed": best,
        "best_fixed_speedup": fixed[best],
        "auto_over_best": auto["speedup"]["mean"] / fixed[best],
        "auto_steps": dict(sorted(steps.items(), key=lambda kv: -kv[1])),
    }


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
def main(runs: tuple[Path, ...], json_out: Path | None) -> None:
    out = {}
    for path in runs:
        summary = json.loads(path.read_text())["summary"]
        for prefix in ("", "cpp "):
            r = regret(summary, prefix)
            if r is None:
                continue
            out[f"{path.name} {prefix or 'python '}".strip()] = r
            click.echo(
                f"{path.name} {prefix or 'python '}: auto {r['auto_speedup']:.2f}x, best fixed "
                f"{r['best_fixed']} {r['best_fixed_speedup']:.2f}x, ratio "
                f"{r['auto_over_best']:.3f}; auto ran {r['auto_steps']}"
            )
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
