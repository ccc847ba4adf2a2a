"""Soak test: many generation requests on one loaded pair, alternating modes and prompts.

    python scripts/soak.py [--target T.pte --draft D.pte] [--requests 200]
        [--max-new-tokens 64] [--fresh-checks 20] [--json OUT.json]

Every request resets and reuses the same programs. The script reports resident memory after
each request and its slope after warm-up (a leak shows as a positive slope), and checks that
outputs do not depend on what ran before: each (mode, prompt) pair runs at least twice
with different predecessors and must repeat exactly, greedy speculation must equal
target-only, and a sample of requests is re-run on freshly loaded runners. Exit 1 on any
mismatch. Defaults to the bundled pair exported by ``scripts/export_bundled.sh``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from etspec.runtime.loading import load_programs
from etspec.runtime.runner import GenerationResult, TextLLMRunner, speculative_runner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.stats import current_rss_bytes, peak_rss_bytes
from etspec.tools.prompts import load_prompts

ROOT = Path(__file__).resolve().parents[1]
# (name, tree setting, KV strategy, sampling temperature); None: target-only.
MODES: list[tuple[str, TreeSettings | None, str, float]] = [
    ("target-only", None, "position-overwrite", 0.0),
    ("chain3", TreeSettings("chain", 3), "position-overwrite", 0.0),
    ("chain7 scratch", TreeSettings("chain", 7), "scratch-commit", 0.0),
    ("static", TreeSettings("static"), "position-overwrite", 0.0),
    ("dynamic", TreeSettings("dynamic"), "scratch-commit", 0.0),
    ("chain3 sampled", TreeSettings("chain", 3), "position-overwrite", 0.8),
]


def _runners(target: Path, draft: Path) -> dict[str, TextLLMRunner]:
    """One runner per mode, all over one loaded pair."""
    spec = RunnerSpec(target, draft)
    target_program, draft_program = load_programs(spec)
    base = TextLLMRunner(target_program)
    out = {"target-only": base}
    for name, tree, kv, _ in MODES:
        if tree is not None:
            mode_spec = replace(spec, kv_strategy=kv)
            out[name] = speculative_runner(mode_spec, base, draft_program, tree)
    return out


def _request(
    runners: dict[str, TextLLMRunner], mode: str, ids: list[int], budget: int, seed: int
) -> GenerationResult:
    temperature = next(t for name, _, _, t in MODES if name == mode)
    sampling = SamplingConfig(temperature, seed=seed) if temperature else SamplingConfig()
    return runners[mode].generate(ids, budget, sampling, ignore_eos=True)


def slope_per_request(values: list[int]) -> float:
    """Least-squares slope of ``values`` against their index."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    num = sum((i - mx) * (v - my) for i, v in enumerate(values))
    return num / sum((i - mx) ** 2 for i in range(n))


@click.command()
@click.option(
    "--target", type=click.Path(path_type=Path), default=ROOT / ".etspec-cache/target.pte"
)
@click.option("--draft", type=click.Path(path_type=Path), default=ROOT / ".etspec-cache/draft.pte")
@click.option(
    "--prompts",
    default="humaneval",
    show_default=True,
    help="humaneval or a JSONL file (random ids for a pair without tokenizer).",
)
@click.option("--requests", default=200, show_default=True)
@click.option("--max-new-tokens", default=64, show_default=True)
@click.option("--warmup", default=20, show_default=True, help="Requests before the RSS fit.")
@click.option("--fresh-checks", default=20, show_default=True, help="Requests re-run fresh.")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "out", type=click.Path(path_type=Path), default=None)
def soak(
    target: Path,
    draft: Path,
    prompts: str,
    requests: int,
    max_new_tokens: int,
    warmup: int,
    fresh_checks: int,
    seed: int,
    out: Path | None,
) -> None:
    rng = random.Random(seed)
    runners = _runners(target, draft)
    meta = runners["target-only"].meta
    room = meta.max_context - max_new_tokens
    if runners["target-only"].tokenizer is None:  # a pair without tokenizer: random ids
        pool = [
            [rng.randrange(meta.vocab_size) for _ in range(rng.randint(2, min(16, room)))]
            for _ in range(64)
        ]
    else:
        encode = runners["target-only"].encode
        pool = [encode(p.text)[-room:] for p in load_prompts(prompts)]
    per_mode = min(len(pool), max(1, requests // 2 // len(MODES)))
    combos = [(m, p) for m, *_ in MODES for p in range(per_mode)]
    # Every combo twice, in a shuffled order: each repeat follows different requests.
    order = (combos * (requests // len(combos) + 1))[:requests]
    rng.shuffle(order)
    outputs: dict[tuple[str, int], list[int]] = {}
    repeat_mismatches, rss, tokens = [], [], 0
    t0 = time.perf_counter()
    for i, (mode, p) in enumerate(tqdm(order, desc="soak", leave=False)):
        result = _request(runners, mode, pool[p], max_new_tokens, seed=p)
        tokens += len(result.token_ids)
        rss.append(current_rss_bytes())
        key = (mode, p)
        if key in outputs and outputs[key] != result.token_ids:
            repeat_mismatches.append({"request": i, "mode": mode, "prompt": p})
        outputs.setdefault(key, result.token_ids)
    elapsed = time.perf_counter() - t0
    greedy = {name for name, _, _, t in MODES if t == 0}
    greedy_mismatches = [
        {"mode": m, "prompt": p}
        for (m, p), ids in outputs.items()
        if m in greedy and ids != outputs.get(("target-only", p), ids)
    ]
    steady = rss[warmup:]
    slope = slope_per_request(steady)
    fresh_mismatches = []
    checks = rng.sample(sorted(outputs), min(fresh_checks, len(outputs)))
    for mode, p in tqdm(checks, desc="fresh", leave=False):
        fresh = _runners(target, draft)
        if _request(fresh, mode, pool[p], max_new_tokens, seed=p).token_ids != outputs[(mode, p)]:
            fresh_mismatches.append({"mode": mode, "prompt": p})
        del fresh
    report: dict[str, Any] = {
        "target": str(target),
        "draft": str(draft),
        "requests": len(order),
        "generated_tokens": tokens,
        "modes": {m: sum(1 for mode, _ in order if mode == m) for m, *_ in MODES},
        "distinct_requests": len(outputs),
        "seconds": round(elapsed, 2),
        "rss_bytes": rss,
        "rss_after_warmup_bytes": steady[0] if steady else None,
        "rss_final_bytes": rss[-1] if rss else None,
        "rss_slope_bytes_per_request": slope,
        "peak_rss_bytes": peak_rss_bytes(),
        "fresh_checks": min(fresh_checks, len(outputs)),
        "repeat_mismatches": repeat_mismatches,
        "greedy_mismatches": greedy_mismatches,
        "fresh_mismatches": fresh_mismatches,
    }
    summary = {k: v for k, v in report.items() if k != "rss_bytes"}
    click.echo(json.dumps(summary, indent=1))
    if out is not None:
        out.write_text(json.dumps(report, indent=1))
    if repeat_mismatches or greedy_mismatches or fresh_mismatches:
        sys.exit(1)


if __name__ == "__main__":
    soak()
