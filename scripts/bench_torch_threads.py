"""What torch's own threads cost a Python generation over .pte programs.

    python scripts/bench_torch_threads.py --target T.pte [--draft D.pte] [--prompts english]
        [--num-prompts 8] [--max-new-tokens 64] [--repeats 3] [--json OUT.json]

The runtime runs torch on one thread while ``.pte`` programs generate
(``runtime/threads.py``): torch then does only host work, and its OpenMP threads, woken by
an op over a 262k-entry row of logits, spin and take a core from ExecuTorch's own pool.
This times each prompt with that on and off (torch left at its own thread count),
interleaved prompt by prompt so the machine's drift hits both alike: target-only, greedy
and sampled (T=0.8, top-p 0.95, seed 0), and with ``--draft`` also ``--tree auto``. Reports
tokens/s per setting (pooled over prompts, best of ``--repeats`` passes) and the mean time
of a target decode call inside the loop. JSON on stdout (and in ``--json``).
"""

from __future__ import annotations

import platform
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import torch

from etspec.runtime.program import PteProgram
from etspec.runtime.runner import load_runners
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec
from etspec.tools.prompts import load_prompts
from etspec.tools.report import emit_report

SAMPLED = SamplingConfig(0.8, top_p=0.95, seed=0)


@click.command()
@click.option("--target", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--draft", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--prompts", "source", default="english", show_default=True)
@click.option("--num-prompts", default=8, show_default=True)
@click.option("--max-new-tokens", default=64, show_default=True)
@click.option("--repeats", default=3, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
def main(
    target: str,
    draft: str | None,
    source: str,
    num_prompts: int,
    max_new_tokens: int,
    repeats: int,
    json_out: str | None,
) -> None:
    base, spec = load_runners(RunnerSpec(Path(target), Path(draft) if draft else None))
    texts = [p.text for p in load_prompts(source, num_prompts)]
    systems = [("target-only", base)] + ([("auto", spec)] if spec is not None else [])
    # Time the decode calls themselves: what the spinning threads slow is the program.
    calls: dict[str, list[float]] = defaultdict(list)
    run = PteProgram.run
    setting = ["on"]

    def timed_run(self: PteProgram, method: str, *inputs: torch.Tensor) -> Any:
        t0 = time.perf_counter()
        out = run(self, method, *inputs)
        if method == "target_decode":
            calls[setting[0]].append(time.perf_counter() - t0)
        return out

    PteProgram.run = timed_run  # type: ignore[method-assign]
    for _, runner in systems:
        runner.generate(texts[0], 8, ignore_eos=True)  # warm-up: one-time costs
    best: dict[str, float] = {}
    for _ in range(repeats):
        seconds: dict[str, float] = defaultdict(float)
        tokens: dict[str, int] = defaultdict(int)
        for text in texts:
            for name, runner in systems:
                for mode, sampling in (("greedy", SamplingConfig()), ("sampled", SAMPLED)):
                    for on in (True, False):
                        setting[0] = "on" if on else "off"
                        runner._pte_only = on  # the switch the runner reads per request
                        key = f"{name} {mode} single-threaded torch {setting[0]}"
                        t0 = time.perf_counter()
                        out = runner.generate(text, max_new_tokens, sampling, ignore_eos=True)
                        seconds[key] += time.perf_counter() - t0
                        tokens[key] += len(out.token_ids)
        for key in seconds:
            best[key] = max(best.get(key, 0.0), tokens[key] / seconds[key])
    report = {
        "target": target,
        "draft": draft,
        "prompts": f"{source}[:{num_prompts}]",
        "max_new_tokens": max_new_tokens,
        "machine": f"{platform.machine()}, torch threads {torch.get_num_threads()}",
        "tokens_per_s": best,
        "target_decode_ms": {k: 1e3 * sum(v) / len(v) for k, v in calls.items()},
    }
    emit_report(report, json_out)


if __name__ == "__main__":
    main()
