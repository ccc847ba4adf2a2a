"""What sampling one token costs on the host, per row of a real target's logits.

    python scripts/bench_sampling.py --target gemma.pte [--json OUT.json]

Decodes a few prompts greedily with the target to collect real logit rows (a 262k-entry row
for Gemma 3), then times, per row and per setting, the reference dense distribution
(``Sampler.probs``: softmax and a full sort for top-p, then a draw over the vocabulary, what
the decode loop ran before) against ``Sampler.dist`` plus a draw (what it runs now), and
reports medians, the kept set's size and the decode call itself for scale. JSON on stdout
(and in ``--json``).
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path

import click
import torch

from etspec.runtime.runner import load_runners
from etspec.runtime.sampling import Sampler, SamplingConfig
from etspec.runtime.spec import RunnerSpec
from etspec.tools.bench_harness import manifest
from etspec.tools.report import emit_report

PROMPTS = [
    "The history of the printing press begins",
    "def merge_sort(items):\n",
    "Question: Why is the sky blue?\nAnswer:",
]
SETTINGS = [(0.8, 0, 1.0), (0.8, 40, 1.0), (0.8, 0, 0.95), (0.6, 0, 0.9), (1.0, 40, 0.95)]


def _median_ms(fn, rows: list[torch.Tensor], repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        for row in rows:
            t0 = time.perf_counter()
            fn(row)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


@click.command()
@click.option("--target", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--tokens", default=16, show_default=True, help="Rows collected per prompt.")
@click.option("--repeats", default=3, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
def main(target: str, tokens: int, repeats: int, json_out: str | None) -> None:
    base, _ = load_runners(RunnerSpec(Path(target)))
    rows: list[torch.Tensor] = []
    start = time.perf_counter()
    for prompt in PROMPTS:
        out = base.generate(prompt, tokens, record_logits=True, ignore_eos=True)
        assert out.logits is not None
        rows += list(out.logits)
    decode_ms = (time.perf_counter() - start) * 1e3 / (len(PROMPTS) * tokens)
    results = []
    for t, k, p in SETTINGS:
        sampler = Sampler(SamplingConfig(t, k, p, seed=0))

        def dense(row: torch.Tensor, s: Sampler = sampler) -> int:
            probs = s.probs(row.reshape(1, -1))
            return int(torch.multinomial(probs, 1)[0, 0])

        def sparse(row: torch.Tensor, s: Sampler = sampler) -> int:
            return s.draw(s.dist(row), 0)

        kept = [len(sampler.dist(row).ids) for row in rows]
        results.append({
            "temperature": t, "top_k": k, "top_p": p,
            "dense_ms": _median_ms(dense, rows, 1),
            "sparse_ms": _median_ms(sparse, rows, repeats),
            "kept_median": statistics.median(kept), "kept_max": max(kept),
        })  # fmt: skip
    report = {
        "manifest": manifest({"tokens": tokens, "repeats": repeats}, {"target": Path(target)}),
        "target": target,
        "vocab_size": rows[0].numel(),
        "rows": len(rows),
        "generate_ms_per_token_greedy": decode_ms,
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
        "settings": results,
    }
    emit_report(report, json_out)


if __name__ == "__main__":
    main()
