"""The task-type tables of docs/results.md from `etspec bench --prompts tasks` runs.

    python -m etspec.tools.tasks_table RUN1.json RUN2.json RUN3.json [--json OUT.json]

Per system (each of Python's and the C++ runner's against its own runtime's target-only):
the mean speedup over every prompt and per task-type set (the mean over runs of each run's
mean), the least per-prompt speedup over every run, the prompts below 0.95x, the least of
each prompt's mean over the runs, the share of steps each way ran (none: a plain decode;
lookup; the model's chains and trees) and of the tokens they emitted
(``etspec.tools.attribution``), and the repetition of target-only's text (its share of
4-grams seen before: what prompt lookup can predict); then, per runtime and set, the
default (``combined auto``) against the faster of the drafters alone: the ratio of their
means of per-prompt mean speedups over the runs, and the paired t statistic over the set's
prompts (what "the default >= the faster drafter alone" rests on); and, where the runs
also timed fixed shapes of the default's drafter (``--trees auto,chain2,...``), ``auto``
against the best of them per runtime and set, the same way.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from etspec.tools.attribution import pooled


def baseline(name: str) -> str:
    return "cpp target-only" if name.startswith("cpp ") else "target-only"


def table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system: mean speedup overall and per set, least per-prompt speedup, prompts
    below 0.95x, and step shares; plus target-only's repetition per set."""
    out: dict[str, Any] = {"runs": len(runs), "systems": {}, "repetition": {}}
    names = [n for n in runs[0]["records"] if not n.endswith("target-only")]
    for name in names:
        per_run: list[dict[str, float]] = []
        below, prompts = 0, 0
        every_record: list[dict[str, Any]] = []
        by_prompt: dict[str, list[float]] = defaultdict(list)
        for run in runs:
            recs = run["records"]
            base = {r["prompt_id"]: r for r in recs[baseline(name)]}
            sets: dict[str, list[float]] = defaultdict(list)
            for r in recs[name]:
                b = base[r["prompt_id"]]
                if not (r["tokens_per_s"] and b["tokens_per_s"]):
                    continue
                s = r["tokens_per_s"] / b["tokens_per_s"]
                sets[r["prompt_id"].split("/")[0]].append(s)
                by_prompt[r["prompt_id"]].append(s)
                below += s < 0.95
                prompts += 1
                every_record.append(r)
            every = [v for vs in sets.values() for v in vs]
            per_run.append(
                {"all": statistics.mean(every), **{k: statistics.mean(v) for k, v in sets.items()}}
            )
        keys = per_run[0].keys()
        pool = pooled(every_record)
        # Token shares need each shape's accepted tokens (records from before they were
        # counted have steps only).
        counted = all("shape_accepted" in r for r in every_record)
        out["systems"][name] = {
            "mean": {k: statistics.mean(r[k] for r in per_run) for k in keys},
            "range": {k: [min(r[k] for r in per_run), max(r[k] for r in per_run)] for k in keys},
            "least_prompt": min(min(v) for v in by_prompt.values()),
            # The least of each prompt's mean over the runs: what a prompt gives once one
            # run's scatter (timing, ``etspec bench --control``, and an unseeded request's
            # own draw) is averaged down.
            "least_prompt_mean": min(statistics.mean(v) for v in by_prompt.values()),
            "below_0.95": below,
            "prompts": prompts,
            "step_shares": {k: d["step_share"] for k, d in pool.items()},
            "token_shares": {k: d["token_share"] for k, d in pool.items()} if counted else None,
        }
    for run in runs:
        for r in run["records"]["target-only"]:
            key = r["prompt_id"].split("/")[0]
            out["repetition"].setdefault(key, []).append(r.get("repeated_4grams", 0.0))
    out["repetition"] = {k: statistics.mean(v) for k, v in out["repetition"].items()}
    return out


DEFAULT, ALONE = "combined auto", ("prompt-lookup auto", "eagle3 auto")


def _speeds(
    runs: list[dict[str, Any]], prefix: str, names: list[str]
) -> dict[tuple[str, str], float]:
    """(system, prompt) -> its speedup over its runtime's target-only, averaged over the runs
    (a prompt's runs are not independent samples of a set; its prompts are)."""
    speed: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        recs = run["records"]
        base = {r["prompt_id"]: r["tokens_per_s"] for r in recs[baseline(prefix + DEFAULT)]}
        for name in names:
            for r in recs[prefix + name]:
                speed[(name, r["prompt_id"])].append(r["tokens_per_s"] / base[r["prompt_id"]])
    return {k: statistics.mean(v) for k, v in speed.items()}


def _sets(mean: dict[tuple[str, str], float], every: bool = False) -> dict[str, list[str]]:
    """Set name -> the default's prompts in it (and "all": every prompt, when ``every``)."""
    sets: dict[str, list[str]] = defaultdict(list)
    for name, pid in mean:
        if name == DEFAULT:
            if every:
                sets["all"].append(pid)
            sets[pid.split("/")[0]].append(pid)
    return sets


def _against(
    mean: dict[tuple[str, str], float], rivals: list[str], ids: list[str]
) -> dict[str, Any]:
    """The default against the best of ``rivals`` over the prompts ``ids``: the ratio of their
    mean speedups and the paired t of the per-prompt differences (None if they are equal)."""
    speed = {n: statistics.mean(mean[(n, i)] for i in ids) for n in rivals}
    best = max(speed, key=lambda n: speed[n])
    diff = [mean[(DEFAULT, i)] - mean[(best, i)] for i in ids]
    sd = statistics.stdev(diff) if len(diff) > 1 else 0.0
    return {
        "best": best,
        "best_speedup": speed[best],
        "ratio": statistics.mean(mean[(DEFAULT, i)] for i in ids) / speed[best],
        "t": statistics.mean(diff) / (sd / len(diff) ** 0.5) if sd else None,
        "prompts": len(ids),
    }


def against_alone(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per runtime ("" Python, "cpp ") and set: the default against the faster drafter alone,
    from per-prompt speedups averaged over the runs, with the paired t over the set's prompts."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for prefix in ("", "cpp "):
        if any(prefix + n not in runs[0]["records"] for n in (DEFAULT, *ALONE)):
            continue
        mean = _speeds(runs, prefix, [DEFAULT, *ALONE])
        runtime = out.setdefault(prefix.strip() or "python", {})
        for key, ids in _sets(mean).items():
            got = _against(mean, list(ALONE), ids)
            runtime[key] = {"faster_alone": got.pop("best"), **got}
    return out


def against_best_shape(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per runtime and set (and "all"): the default (``combined auto``) against the fastest
    fixed shape of the same drafter timed beside it (``combined chain3``, ...), as
    ``against_alone`` compares drafters, and each run's ratio over every prompt. Empty when
    the runs timed no fixed shape."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    drafter = DEFAULT.split()[0]
    for prefix in ("", "cpp "):
        names = [
            n[len(prefix) :]
            for n in runs[0]["records"]
            if n.startswith(prefix + drafter + " ") and n[len(prefix) :] != DEFAULT
        ]
        if prefix + DEFAULT not in runs[0]["records"] or not names:
            continue
        per_run = []
        for run in runs:  # each run over every prompt
            one = _speeds([run], prefix, [DEFAULT, *names])
            got = _against(one, names, _sets(one, every=True)["all"])
            per_run.append({"ratio": got["ratio"], "best": got["best"]})
        mean = _speeds(runs, prefix, [DEFAULT, *names])
        runtime = out.setdefault(prefix.strip() or "python", {})
        for key, ids in _sets(mean, every=True).items():
            got = _against(mean, names, ids)
            runtime[key] = {"best_shape": got.pop("best"), **got}
        runtime["all"]["per_run"] = per_run
    return out


def _t(v: dict[str, Any]) -> str:
    return "" if v["t"] is None else f", t {v['t']:.1f}"


def _versus_rows(
    title: str,
    keys: list[str],
    versus: dict[str, dict[str, dict[str, Any]]],
    cell: Callable[[dict[str, Any]], str],
) -> list[str]:
    """A table of one comparison: a row per runtime, a cell per set (none: no rows)."""
    if not versus:
        return []
    rows = ["", f"| {title} | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for runtime, per_set in versus.items():
        rows.append(f"| {runtime} | " + " | ".join(cell(per_set[k]) for k in keys) + " |")
    return rows


def markdown(result: dict[str, Any]) -> str:
    systems = result["systems"]
    sets = [k for k in next(iter(systems.values()))["mean"] if k != "all"]
    head = (
        "| system | all | "
        + " | ".join(sets)
        + " | least prompt | below 0.95x | least prompt's mean | steps (tokens): decode / lookup"
        " / model |"
    )
    rows = [head, "|" + "---|" * (len(sets) + 6)]
    for name, s in systems.items():
        cells = [f"{s['mean']['all']:.2f}x"] + [f"{s['mean'][k]:.2f}x" for k in sets]
        sh, tok = s["step_shares"], s.get("token_shares")
        shares = " / ".join(
            f"{sh.get(k, 0):.0%}" + (f" ({tok.get(k, 0):.0%})" if tok else "")
            for k in ("none", "lookup", "model")
        )
        rows.append(
            f"| {name} | " + " | ".join(cells) + f" | {s['least_prompt']:.2f}x | "
            f"{s['below_0.95']}/{s['prompts']} | {s['least_prompt_mean']:.2f}x | {shares} |"
        )
    rep = result["repetition"]
    rows.append(
        "| target-only's repeated 4-grams | - | "
        + " | ".join(f"{rep.get(k, 0):.0%}" for k in sets)
        + " | | | | |"
    )
    rows += _versus_rows(
        "the default against the faster drafter alone",
        sets,
        result.get("against_alone") or {},
        lambda v: f"{v['ratio']:.3f} of {v['faster_alone'].split()[0]}{_t(v)}",
    )
    shapes = result.get("against_best_shape") or {}
    rows += _versus_rows(
        "`auto` against the best fixed shape",
        ["all", *sets],
        shapes,
        lambda v: (
            f"{v['ratio']:.3f} ({v['best_shape'].split()[-1]} {v['best_speedup']:.2f}x{_t(v)})"
        ),
    )
    for runtime, per_set in shapes.items():
        each = ", ".join(
            f"{r['ratio']:.3f} ({r['best'].split()[-1]})" for r in per_set["all"]["per_run"]
        )
        rows.append(f"\n{runtime}, each run over every prompt: {each}")
    return "\n".join(rows)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False))
def main(runs: tuple[Path, ...], json_out: Path | None) -> None:
    loaded = [json.loads(p.read_text()) for p in runs]
    result = table(loaded)
    result["against_alone"] = against_alone(loaded)
    result["against_best_shape"] = against_best_shape(loaded)
    result["files"] = [str(p) for p in runs]
    click.echo(markdown(result))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
