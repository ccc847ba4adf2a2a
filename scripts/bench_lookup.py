"""What prompt lookup's n-gram search costs per step on the host.

    python scripts/bench_lookup.py [--lengths 128,512,2048] [--json OUT.json]

Times ``PromptLookupDraftRunner.match`` (the search ``--draft-method prompt-lookup`` and
``combined`` run before every step) over histories of each length, drawn uniformly from
``--vocab`` tokens (mostly 1-gram matches, so each call tries every n), against the
torch-op search it replaced.
Reports median microseconds per call. JSON on stdout (and in ``--json``).
"""

from __future__ import annotations

import platform
import random
import statistics
import time

import click
import torch

from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.tools.report import emit_report


def torch_match(
    history: list[int], longest: int, shortest: int, most: int
) -> tuple[int, list[int]]:
    """The search as torch ops (the implementation before numpy), for comparison."""
    seq = torch.tensor(history, dtype=torch.long)
    total = seq.numel()
    for n in range(min(longest, total - 1), shortest - 1, -1):
        windows = seq[: total - 1].unfold(0, n, 1)
        hits = (windows == seq[total - n :]).all(-1).nonzero()
        if hits.numel():
            start = int(hits[-1]) + n
            return n, seq[start : start + most].tolist()
    return 0, []


def _median_us(fn, calls: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


@click.command()
@click.option("--lengths", default="128,512,2048", show_default=True)
@click.option("--vocab", default=2000, show_default=True, help="Distinct tokens drawn.")
@click.option("--calls", default=2000, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
def main(lengths: str, vocab: int, calls: int, json_out: str | None) -> None:
    torch.set_num_threads(1)  # as the runtime runs torch while .pte programs generate
    rng = random.Random(0)
    rows = []
    for length in (int(x) for x in lengths.split(",")):
        history = [rng.randrange(vocab) for _ in range(length)]
        runner = PromptLookupDraftRunner(vocab)
        runner.history = history
        assert runner.match(15) == torch_match(history, 3, 1, 15)
        ours = _median_us(lambda r=runner: r.match(15), calls)
        before = _median_us(lambda h=history: torch_match(h, 3, 1, 15), calls)
        rows.append({"history": length, "numpy_us": round(ours, 2), "torch_us": round(before, 2)})
    emit_report({"machine": platform.processor() or platform.machine(), "rows": rows}, json_out)


if __name__ == "__main__":
    main()
