"""Markdown tables from `etspec bench --json` runs: per prompt set and system, greedy and
sampled tokens/s (mean over runs, with the range), speed against its own runtime's
target-only (Python, the C++ runner, llama.cpp; per run, then the range), TPC, per-token
acceptance (mean over runs, with the range: several sampled draws of one setting give the
mean a bar is judged on) and how repetitive the output was (share of repeated 4-grams).

    python -m etspec.tools.results_table RUN.json [RUN.json ...] [--json OUT.json]

Runs are grouped by their prompt set and temperature (from each file's manifest); each group
gives one row per system. The summary JSON (``--json``) holds the same numbers.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import click


def _load(paths: list[Path]) -> dict[tuple[str, float], list[dict[str, Any]]]:
    groups: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for path in paths:
        report = json.loads(path.read_text())
        settings = report["manifest"]["settings"]
        groups[(settings["prompts"], float(settings["temperature"]))].append(report)
    return groups


def _span(values: list[float], fmt: str) -> str:
    mean = statistics.fmean(values)
    if len({format(v, fmt) for v in values}) == 1:
        return format(mean, fmt)
    return f"{format(mean, fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def _own_baseline(name: str) -> str:
    """The target-only system of ``name``'s runtime."""
    for prefix in ("llama.cpp ", "cpp "):
        if name.startswith(prefix):
            return prefix + "target-only"
    return "target-only"


def per_token_acceptance(accept_pos: list[float]) -> float | None:
    """The acceptance of a drafted token whose predecessors were accepted, over all depths,
    from ``accept_pos`` (entry d: the share of steps whose first d + 1 drafted tokens were
    all accepted): accepted tokens over tokens that reached verification."""
    if not accept_pos:
        return None
    return sum(accept_pos) / (1 + sum(accept_pos[:-1]))


def summarize(paths: list[Path]) -> dict[str, Any]:
    """Per (prompt set, temperature, system): the per-run means of tokens/s, speed against
    its runtime's target-only, TPC and repeated 4-grams, and the runs' settings."""
    out: dict[str, Any] = {}
    for (prompts, temperature), reports in sorted(_load(paths).items()):
        systems: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for report in reports:
            summ = report["summary"]
            for name, s in summ.items():
                row = systems[name]
                row["tokens_per_s"].append(s["tokens_per_s"]["mean"])
                own = summ.get(_own_baseline(name), summ["target-only"])
                row["vs_own_target_only"].append(
                    s["tokens_per_s"]["mean"] / own["tokens_per_s"]["mean"]
                )
                row["tpc"].append(s.get("tpc", {}).get("mean", 1.0))
                row["repeated_4grams"].append(s.get("repeated_4grams", {}).get("mean", 0.0))
                accepted = per_token_acceptance(s.get("accept_pos", []))
                if accepted is not None:
                    row["per_token_acceptance"].append(accepted)
                row["prompts"].append(s["prompts"])
        settings = reports[0]["manifest"]["settings"]
        out[f"{prompts} T={temperature:g}"] = {
            "prompts": prompts,
            "temperature": temperature,
            "top_p": settings.get("top_p"),
            "runs": len(reports),
            "systems": {n: dict(v) for n, v in systems.items()},
        }
    return out


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        "| prompts | sampling | system | tokens/s | vs its target-only | TPC "
        "| per-token acceptance | repeated 4-grams |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group in summary.values():
        t = group["temperature"]
        sampling = "greedy" if t == 0 else f"T={t:g}, top-p {group['top_p']:g}"
        label = f"{group['prompts']} ({group['systems']['target-only']['prompts'][0]})"
        for name, row in group["systems"].items():
            speed = _span(row["tokens_per_s"], ".1f")
            ratio = _span(row["vs_own_target_only"], ".2f")
            tpc, repeated = statistics.fmean(row["tpc"]), statistics.fmean(row["repeated_4grams"])
            accepted = row.get("per_token_acceptance")
            acc = _span(accepted, ".3f") if accepted else "-"
            cells = [
                label, sampling, name, speed, f"{ratio}x", f"{tpc:.2f}", acc, f"{repeated:.2f}"
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path))
def main(runs: tuple[Path, ...], json_out: Path | None) -> None:
    summary = summarize(list(runs))
    click.echo(markdown(summary))
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
