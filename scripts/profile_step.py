"""Where a speculative step's time goes in the Python runtime: the programs' own calls
against the host work around them.

    python scripts/profile_step.py [--target T.pte] [--draft D.pte] [--trees chain7,N7]
        [--prompts humaneval] [--num-prompts 16] [--max-new-tokens 128] [--repeats 3]
        [--temperature 0.8 --top-p 0.95 --seed 1] [--json OUT.json]

Every program call is timed where it enters the program (``Program.run``), so per step the
report splits each stage into what the program did and what Python did around it:

- ``program_ms``: verify, draft steps, draft extend and commit calls per step;
- ``host_ms``: draft (building each draft call's inputs, picking tokens), tensorize, accept,
  commit and verify, each the stage's wall time minus the program calls inside it, and
  ``total`` (issue 26's per-step host time: tensorize + accept + commit + the draft's host
  work outside its calls).

The draft's prefill (once per prompt) is left out of both. Each shape runs ``--repeats``
passes over the prompts after one warm-up prompt; the pass with the least host time is
reported (the machine's noise only adds). Greedy unless ``--temperature`` is given; sampled
passes seed prompt i with ``--seed`` + i, so every pass times the same texts. ``ignore_eos``,
so every prompt runs the same number of tokens. Defaults to the bundled pair exported by
``scripts/export_bundled.sh``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from etspec.contract import DRAFT_PREFILL, TARGET_COMMIT, TARGET_PREFILL
from etspec.runtime.program import Program
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.settings import parse_shape
from etspec.tools.prompts import load_prompts
from etspec.tools.systems import load_systems

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".etspec-cache"


class CallTimes:
    """Seconds spent inside each program method, accumulated since the last ``take``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, program: Program) -> None:
        """Time every ``program.run`` (an instance attribute shadowing the method)."""
        run: Callable[..., Any] = program.run

        def timed(method: str, *inputs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return run(method, *inputs)
            finally:
                self.seconds[method] += time.perf_counter() - t0
                self.calls[method] += 1

        program.run = timed  # type: ignore[method-assign]

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        out = dict(self.seconds), dict(self.calls)
        self.seconds.clear()
        self.calls.clear()
        return out


def split(stage_s: dict[str, float], seconds: dict[str, float], steps: int) -> dict[str, Any]:
    """Per-step program and host milliseconds from one pass's stage and call seconds."""

    def ms(x: float) -> float:
        return round(x / steps * 1e3, 4)

    verify = sum(s for m, s in seconds.items() if m.startswith("target_verify"))
    draft_steps = sum(s for m, s in seconds.items() if m.startswith("draft_step"))
    extend = sum(s for m, s in seconds.items() if m.startswith("draft_extend"))
    commit = seconds.get(TARGET_COMMIT, 0.0)
    # The draft stage holds the per-prompt draft prefill too: left out, with its host work
    # (a few tensors per prompt), so what remains is per step.
    draft_host = stage_s["draft"] - seconds.get(DRAFT_PREFILL, 0.0) - draft_steps - extend
    host = {
        "draft": draft_host,
        "tensorize": stage_s["tensorize"],
        "accept": stage_s["accept"],
        "commit": stage_s["commit"] - commit,
        "verify": stage_s["verify"] - verify,
    }
    total = host["draft"] + host["tensorize"] + host["accept"] + host["commit"]
    return {
        "program_ms": {
            "verify": ms(verify),
            "draft_step": ms(draft_steps),
            "draft_extend": ms(extend),
            "commit": ms(commit),
        },
        "host_ms": {**{k: ms(v) for k, v in host.items()}, "total": ms(total)},
    }


@click.command()
@click.option("--target", type=click.Path(path_type=Path), default=CACHE / "target.pte")
@click.option("--draft", type=click.Path(path_type=Path), default=CACHE / "draft.pte")
@click.option("--trees", default="chain7,N7", help="Fixed shapes to profile (comma list).")
@click.option("--prompts", default="humaneval")
@click.option("--num-prompts", default=16, type=click.IntRange(1))
@click.option("--max-new-tokens", default=128, type=click.IntRange(1))
@click.option("--repeats", default=3, type=click.IntRange(1))
@click.option("--temperature", default=0.0, type=click.FloatRange(0), help="0 is greedy.")
@click.option("--top-p", default=1.0, type=click.FloatRange(0, 1, min_open=True))
@click.option("--seed", default=1, type=click.IntRange(0), help="Prompt i samples with seed+i.")
@click.option("--json", "json_out", type=click.Path(path_type=Path))
def main(
    target: Path,
    draft: Path,
    trees: str,
    prompts: str,
    num_prompts: int,
    max_new_tokens: int,
    repeats: int,
    temperature: float,
    top_p: float,
    seed: int,
    json_out: Path | None,
) -> None:
    names = [t.strip() for t in trees.split(",") if t.strip()]
    shapes = {name: parse_shape(name) for name in names}
    spec = RunnerSpec(target, draft, tree=TreeSettings("chain"))
    _, systems = load_systems(spec, shapes)
    timer = CallTimes()
    for program in {
        id(p): p for r in systems.values() for p in (r.target, *r.generator.programs())
    }.values():
        timer.wrap(program)
    texts = [p.text for p in load_prompts(prompts, num_prompts)]

    def sampling(i: int) -> SamplingConfig | None:
        return SamplingConfig(temperature, top_p=top_p, seed=seed + i) if temperature else None

    report: dict[str, Any] = {
        "target": str(target),
        "draft": str(draft),
        "prompts": prompts,
        "num_prompts": len(texts),
        "max_new_tokens": max_new_tokens,
        "repeats": repeats,
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
        "shapes": {},
    }
    for name, runner in systems.items():
        runner.generate(texts[0], max_new_tokens, sampling(0), ignore_eos=True)  # warm-up
        best: dict[str, Any] | None = None
        for _ in range(repeats):
            timer.take()
            stage_s: dict[str, float] = defaultdict(float)
            steps = tokens = 0
            t0 = time.perf_counter()
            for i, text in enumerate(texts):
                result = runner.generate(text, max_new_tokens, sampling(i), ignore_eos=True)
                stats = result.stats
                steps += stats.verify_calls + stats.decode_calls  # decodes: none proposed
                tokens += stats.generated_tokens
                for k, v in stats.stage_s.items():
                    stage_s[k] += v
            wall = time.perf_counter() - t0
            seconds, calls = timer.take()
            for k in (TARGET_PREFILL,):
                seconds.pop(k, None)
            row = split(stage_s, seconds, steps)
            row.update(
                steps=steps,
                tokens=tokens,
                tpc=round(tokens / steps, 4),
                tokens_per_s=round(tokens / wall, 2),
                calls_per_step={m: round(c / steps, 3) for m, c in sorted(calls.items())},
            )
            if best is None or row["host_ms"]["total"] < best["host_ms"]["total"]:
                best = row
        assert best is not None
        report["shapes"][name] = best
        host, prog = best["host_ms"], best["program_ms"]
        click.echo(
            f"{name}: host {host['total']:.3f} ms/step (draft {host['draft']:.3f}, tensorize "
            f"{host['tensorize']:.3f}, accept {host['accept']:.3f}, commit {host['commit']:.3f})"
            f"; program verify {prog['verify']:.3f}, draft steps {prog['draft_step']:.3f}, "
            f"extend {prog['draft_extend']:.3f}; {best['tokens_per_s']} tok/s"
        )
    if json_out:
        json_out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
