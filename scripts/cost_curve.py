"""Per-call cost of a target artifact: decode and every verify width, at several contexts.

    python scripts/cost_curve.py --pte FILE.pte [--pte ...] [--context 64,512,2048]
        [--repeats 100] [--after] [--json OUT.json] [--plot OUT.png]

For each artifact and each context length L it times (median and 10th percentile of
``--repeats`` rounds, each calling every method once in turn, after a warm-up call)
``target_decode`` at position L and each compiled ``target_verify`` width K
verifying a K-row chain rooted at L (position-overwrite slots, the masks the runtime
builds), and reports milliseconds per call and ``t_verify(K) / t_decode``. Speculation
pays when verifying K tokens costs about what decoding one does, so this curve is what the
exported widths and the dispatcher's candidates should follow. The committed cache holds
whatever the previous calls wrote: costs do not depend on the values attended.

``--after`` also times each call right after each other one (``"8 after 16"``: a verify of
8 rows called just after one of 16; the median of ``--repeats`` such pairs): what a step's
call costs can depend on the call the step before made, which a per-width cost model (the
dispatcher's) then charges to whichever width comes next.

Calls run through ``executorch.runtime`` in this process, with ExecuTorch's default thread
count (the machine's cores); the JSON records the core count and load average.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import click
import torch


def _timed(
    program: Any, calls: dict[str, tuple[str, tuple[torch.Tensor, ...]]], repeats: int
) -> dict[str, dict[str, float]]:
    """Milliseconds per call of each ``calls`` entry (name -> (method, inputs)): the median
    and 10th percentile of ``repeats`` rounds that call every entry once in turn, so a drift
    in machine speed hits every width alike."""
    for method, inputs in calls.values():
        program.run(method, *inputs)  # warm-up: the first call of a shape re-plans it
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (method, inputs) in calls.items():
            t0 = time.perf_counter()
            program.run(method, *inputs)
            times[name].append(time.perf_counter() - t0)
    return {
        name: {
            "median": statistics.median(t) * 1e3,
            "p10": sorted(t)[len(t) // 10] * 1e3,
        }
        for name, t in times.items()
    }


def _after(
    program: Any, calls: dict[str, tuple[str, tuple[torch.Tensor, ...]]], repeats: int
) -> dict[str, float]:
    """Milliseconds of each ``calls`` entry right after each entry (``"B after A"``): the
    median over ``repeats`` pairs, the pairs in turn so a drift hits every pair alike."""
    pairs = [(a, b) for a in calls for b in calls]
    times: dict[str, list[float]] = {f"{b} after {a}": [] for a, b in pairs}
    for _ in range(repeats):
        for a, b in pairs:
            program.run(calls[a][0], *calls[a][1])
            method, inputs = calls[b]
            t0 = time.perf_counter()
            program.run(method, *inputs)
            times[f"{b} after {a}"].append(time.perf_counter() - t0)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def _chain_inputs(meta: Any, layout: Any, k: int, c: int) -> tuple[torch.Tensor, ...]:
    """A K-row chain verify rooted at committed length ``c`` (as kv_cache.py builds it)."""
    from etspec.contract import MASK_MIN

    rows = torch.arange(k)
    slots = c + rows
    width = layout.width(c + k)
    mask = torch.full((k, width), MASK_MIN)
    mask[:, :c] = 0.0
    cols = layout.column_of(slots, width)
    for i in range(k):
        mask[i, cols[: i + 1]] = 0.0
    return torch.zeros(k, dtype=torch.long), slots.clone(), slots, mask, *layout.band(c, width)


def measure(path: Path, contexts: list[int], repeats: int, after: bool = False) -> dict[str, Any]:
    from etspec.contract import TARGET_DECODE, TARGET_RESET
    from etspec.runtime.masks import MaskLayout
    from etspec.runtime.program import PteProgram

    program = PteProgram.load(path, expect="target")
    meta = program.metadata
    layout = MaskLayout.of(meta)
    program.run(TARGET_RESET)
    out: dict[str, Any] = {
        "pte": str(path),
        "dtype": meta.dtype,
        "vocab_size": meta.vocab_size,
        "max_context": meta.max_context,
        "verify_widths": list(meta.verify_widths),
        "contexts": {},
    }
    widest = max(meta.verify_widths)
    for c in contexts:
        if c + widest > meta.max_context:
            click.echo(f"{path.name}: context {c} + {widest} rows exceeds {meta.max_context}")
            continue
        position = torch.tensor([c])
        mask = layout.causal(position)
        inputs = (torch.zeros(1, dtype=torch.long), position, mask, *layout.band(c, mask.shape[-1]))
        calls = {"decode": (TARGET_DECODE, inputs)}
        for k in meta.verify_widths:
            calls[str(k)] = (meta.verify_method(k), _chain_inputs(meta, layout, k, c))
        ms = _timed(program, calls, repeats)
        decode = ms.pop("decode")
        row: dict[str, Any] = {
            "decode_ms": decode["median"],
            "decode_p10_ms": decode["p10"],
            "verify_ms": {k: v["median"] for k, v in ms.items()},
            "verify_p10_ms": {k: v["p10"] for k, v in ms.items()},
            "verify_over_decode": {k: v["median"] / decode["median"] for k, v in ms.items()},
        }
        out["contexts"][str(c)] = row
        ratios = " ".join(f"K={k}: {v:.2f}x" for k, v in row["verify_over_decode"].items())
        click.echo(f"{path.name} L={c}: decode {row['decode_ms']:.2f} ms; {ratios}")
        if after:
            row["after_ms"] = _after(program, calls, repeats)
            for b in calls:
                cells = " ".join(f"{a}: {row['after_ms'][f'{b} after {a}']:.2f}" for a in calls)
                click.echo(f"  {b} after  {cells} (ms)")
    return out


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        for c, row in r["contexts"].items():
            ks = [1, *map(int, row["verify_ms"])]
            ys = [1.0, *row["verify_over_decode"].values()]
            ax.plot(ks, ys, marker="o", label=f"{Path(r['pte']).stem} L={c}")
    ax.axhline(1.6, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("verify width K (rows)")
    ax.set_ylabel("t_verify(K) / t_decode")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--pte", "ptes", multiple=True, required=True, type=click.Path(exists=True))
@click.option("--context", default="64,512", show_default=True, help="Context lengths L.")
@click.option("--repeats", default=100, show_default=True)
@click.option("--after", is_flag=True, help="Also time each call right after each other one.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write results.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a PNG of the curves.")
def main(
    ptes: tuple[str, ...],
    context: str,
    repeats: int,
    after: bool,
    json_out: str | None,
    plot: str | None,
) -> None:
    from etspec.tools.bench_harness import artifact_record, manifest

    contexts = [int(c) for c in context.split(",")]
    results = [measure(Path(p), contexts, repeats, after) for p in ptes]
    for r in results:
        r["artifact"] = artifact_record(Path(r["pte"]), "target")
    settings = {"context": contexts, "repeats": repeats, "after": after}
    doc = {
        # The manifest's artifacts are one per kind: each target's record goes with its result.
        "manifest": manifest(settings),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "results": results,
    }
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=1))
    if plot:
        _plot(results, Path(plot))


if __name__ == "__main__":
    main()
