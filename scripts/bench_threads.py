"""What XNNPACK's weight cache costs two runners in two threads.

    python scripts/bench_threads.py [--target T.pte] [--draft D.pte] [--prompts 8]
        [--max-new-tokens 64] [--json OUT.json]

With the weight cache on (etspec's default), XNNPACK runs delegate calls under one
process-wide lock, so two runners (two loads, one per thread) take turns inside the
delegates. This times, in a fresh process per setting (the option is process-wide), one
runner generating the prompts alone and two runners generating them at once, target-only
and speculative (chain of 3), with the cache on and off, and reports tokens/s: one thread,
and both threads together. Defaults to the bundled pair exported by
``scripts/export_bundled.sh``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from etspec.tools.report import emit_report

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".etspec-cache"


def _measure(target: Path, draft: Path, prompts: int, budget: int, cache: bool) -> dict[str, Any]:
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec, TreeSettings
    from etspec.tools.prompts import humaneval_prompts

    texts = [p.text for p in humaneval_prompts()[:prompts]]
    spec = RunnerSpec(target, draft, tree=TreeSettings("chain", 3), weight_cache=cache)
    loads = [load_runners(spec) for _ in range(2)]
    out: dict[str, Any] = {}
    for kind, pick in (("target-only", 0), ("chain3", 1)):
        runners = [load[pick] for load in loads]
        for r in runners:  # warm-up: first calls pay one-time costs
            r.generate(texts[0], 8, ignore_eos=True)
        t0 = time.perf_counter()
        for t in texts:
            runners[0].generate(t, budget, ignore_eos=True)
        alone = prompts * budget / (time.perf_counter() - t0)

        def work(r: Any) -> None:
            for t in texts:
                r.generate(t, budget, ignore_eos=True)

        threads = [threading.Thread(target=work, args=(r,)) for r in runners]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        together = 2 * prompts * budget / (time.perf_counter() - t0)
        out[kind] = {"one_thread_tok_s": alone, "two_threads_total_tok_s": together}
    return out


@click.command()
@click.option("--target", type=click.Path(path_type=Path), default=CACHE / "target.pte")
@click.option("--draft", type=click.Path(path_type=Path), default=CACHE / "draft.pte")
@click.option("--prompts", default=8, show_default=True)
@click.option("--max-new-tokens", default=64, show_default=True)
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
@click.option("--one", type=click.Choice(["on", "off"]), default=None, hidden=True)
def main(
    target: Path, draft: Path, prompts: int, max_new_tokens: int, json_out: Path | None,
    one: str | None,
) -> None:  # fmt: skip
    if one is not None:  # the child process: one setting
        click.echo(json.dumps(_measure(target, draft, prompts, max_new_tokens, one == "on")))
        return
    result: dict[str, Any] = {"target": str(target), "draft": str(draft), "prompts": prompts,
                              "max_new_tokens": max_new_tokens}  # fmt: skip
    for setting in ("on", "off"):
        res = subprocess.run(
            [sys.executable, __file__, "--target", str(target), "--draft", str(draft),
             "--prompts", str(prompts), "--max-new-tokens", str(max_new_tokens),
             "--one", setting],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        result[f"weight_cache_{setting}"] = json.loads(res.stdout.strip().splitlines()[-1])
    emit_report(result, json_out)


if __name__ == "__main__":
    main()
