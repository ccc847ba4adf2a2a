"""Two versions of the code, paired prompt by prompt: `etspec bench` runs of each, compared.

    python -m etspec.tools.paired --base B1.json --base B2.json --new N1.json --new N2.json

Each run's speedup of a system (``--system``, the default ``combined auto``) is taken against
target-only in the same run; a prompt's figure is the mean of its log speedups over a
version's runs, and the versions are compared by the mean over prompts of their difference
(reported as a ratio, new over base) with the paired t over the prompts, overall and per
task-type set (a prompt's runs are not independent samples of a set; its prompts are).

Seeded sampled runs are the ones to pair: a seeded request samples by coupling
(``runtime/sampling.py``), so every system and both versions emit the same text for it and
the comparison is on identical tokens; unseeded, each run's text differs and a prompt's
speedup scatters several times as widely between runs (docs/benchmark.md). Whether the texts
agree is reported (``same_text``), so a pairing on different text is not taken for one on
the same. ``scripts/ab.sh`` runs the two versions alternately and calls this.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

from etspec.tools.tasks_table import baseline


def log_speedups(run: dict[str, Any], system: str) -> dict[str, float]:
    """Per prompt: log(tokens/s of ``system`` over its runtime's target-only) in ``run``."""
    recs = run["records"]
    if system not in recs:
        raise click.ClickException(f"no '{system}' records in a run; pass --system")
    base = {r["prompt_id"]: r["tokens_per_s"] for r in recs[baseline(system)]}
    return {
        r["prompt_id"]: math.log(r["tokens_per_s"] / base[r["prompt_id"]]) for r in recs[system]
    }


def _texts(runs: list[dict[str, Any]], system: str) -> dict[str, set[tuple[int, ...]]]:
    out: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    for run in runs:
        for r in run["records"][system]:
            out[r["prompt_id"]].add(tuple(r.get("token_ids", ())))
    return out


def _compare(diff: list[float]) -> dict[str, Any]:
    sd = statistics.stdev(diff) if len(diff) > 1 else 0.0
    mean = statistics.mean(diff)
    return {
        "ratio": math.exp(mean),
        "t": mean / (sd / math.sqrt(len(diff))) if sd else None,
        "sd": sd,
        "prompts": len(diff),
    }


def paired(
    base: list[dict[str, Any]], new: list[dict[str, Any]], system: str = "combined auto"
) -> dict[str, Any]:
    """New against base: overall and per set (``_compare``), each version's least prompt
    mean and prompt runs below 0.95x, and how many prompts gave one text throughout."""
    versions = {"base": base, "new": new}
    logs = {v: [log_speedups(run, system) for run in runs] for v, runs in versions.items()}
    prompts = sorted(set.intersection(*(set(run) for runs in logs.values() for run in runs)))
    if not prompts:
        raise click.ClickException("the two versions' runs share no prompt")
    mean = {
        v: {p: statistics.mean(run[p] for run in runs) for p in prompts} for v, runs in logs.items()
    }
    sets: dict[str, list[str]] = defaultdict(list)
    for p in prompts:
        sets[p.split("/")[0]].append(p)
    texts = _texts(base + new, system)
    reference = _texts(base + new, baseline(system))
    out: dict[str, Any] = {
        "system": system,
        "runs": {v: len(runs) for v, runs in versions.items()},
        "all": _compare([mean["new"][p] - mean["base"][p] for p in prompts]),
        "sets": {
            k: _compare([mean["new"][p] - mean["base"][p] for p in ids]) for k, ids in sets.items()
        },
        "same_text": sum(len(texts[p] | reference[p]) == 1 for p in prompts),
        "prompts": len(prompts),
    }
    for v, runs in logs.items():
        out[v] = {
            "mean": math.exp(statistics.mean(mean[v].values())),
            "least_prompt_mean": math.exp(min(mean[v].values())),
            "below_0.95": sum(run[p] < math.log(0.95) for run in runs for p in prompts),
            "prompt_runs": len(runs) * len(prompts),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    def cell(c: dict[str, Any]) -> str:
        return f"{c['ratio']:.3f}" + ("" if c["t"] is None else f" (t {c['t']:.1f})")

    sets = list(result["sets"])
    rows = [
        f"{result['system']}: new over base, per-prompt mean log speedup over "
        f"{result['runs']['base']} + {result['runs']['new']} runs; "
        f"{result['same_text']} of {result['prompts']} prompts gave one text throughout",
        "",
        "| | all | " + " | ".join(sets) + " |",
        "|" + "---|" * (len(sets) + 2),
        f"| new / base | {cell(result['all'])} | "
        + " | ".join(cell(result["sets"][k]) for k in sets)
        + " |",
        "",
        "| version | mean | least prompt's mean | prompt runs below 0.95x |",
        "|---|---|---|---|",
    ]
    for v in ("base", "new"):
        s = result[v]
        rows.append(
            f"| {v} | {s['mean']:.3f}x | {s['least_prompt_mean']:.3f}x | "
            f"{s['below_0.95']}/{s['prompt_runs']} |"
        )
    return "\n".join(rows)


@click.command()
@click.option("--base", "base", multiple=True, required=True,
              type=click.Path(path_type=Path, exists=True, dir_okay=False))  # fmt: skip
@click.option("--new", "new", multiple=True, required=True,
              type=click.Path(path_type=Path, exists=True, dir_okay=False))  # fmt: skip
@click.option("--system", default="combined auto", show_default=True,
              help="The records compared (each against its runtime's target-only).")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False))
def main(base: tuple[Path, ...], new: tuple[Path, ...], system: str, json_out: Path | None) -> None:
    def load(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in paths]

    result = paired(load(base), load(new), system)
    result["files"] = {"base": [str(p) for p in base], "new": [str(p) for p in new]}
    click.echo(markdown(result))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
