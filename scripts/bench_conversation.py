"""Conversations that keep their KV cache: time to first token turn by turn, kept against a
fresh prefill of the whole conversation, in both runtimes, and whether the tokens agree.

    python scripts/bench_conversation.py [--target T.pte] [--draft D.pte] [--new-tokens 100]
        [--runs 3] [--cpp-runner build/cpp/etspec_runner] --json OUT.json

A five-turn conversation (the user turns below, written here; a base model has no chat
template, so turns are plain "User:/Assistant:" text), greedy, each answer
``--new-tokens`` long: turn k's prompt is turn k-1's prompt, its answer and the next user
turn. Each turn runs first with ``reuse_prefix`` (prefilling only what the cache does not
hold) and then fresh from position 0 (which rewrites the same tokens, so the next turn's
kept run finds what it would have). Defaults: Gemma 3 270M's default export and the
shipped draft (scripts/bench_gemma_draft.sh exports both), the default drafter.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from etspec.runtime.runner import TextLLMRunner, load_runners
from etspec.runtime.spec import RunnerSpec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools.bench_harness import manifest  # noqa: E402

EXPORTS = ROOT / ".etspec-cache" / "gemma-3-270m" / "exports"
OPENING = "The following is a conversation between a user and a helpful assistant.\n"
TURNS = [
    "I am planning a small vegetable garden on a balcony that gets morning sun. "
    "Which vegetables should I start with, and why?",
    "How often should I water them in summer, and how do I tell if I am overdoing it?",
    "My neighbour says coffee grounds are good fertiliser. Is that true for these plants?",
    "Write a short weekly checklist I can stick on the fridge for looking after them.",
    "Finally, summarise your three most important tips in one sentence each.",
]


def _turn_ids(runner: TextLLMRunner, k: int) -> list[int]:
    assert runner.tokenizer is not None
    text = (OPENING if k == 0 else "\n") + f"User: {TURNS[k]}\nAssistant:"
    return runner.tokenizer.encode(text, special=k == 0)


def _python(runner: TextLLMRunner, new_tokens: int) -> list[dict[str, Any]]:
    runner.reset()
    ids: list[int] = []
    turns = []
    for k in range(len(TURNS)):
        ids = [*ids, *_turn_ids(runner, k)]
        kept = runner.generate(ids, new_tokens, ignore_eos=True, reuse_prefix=True)
        fresh = runner.generate(ids, new_tokens, ignore_eos=True)
        turns.append(_record(len(ids), kept.stats, fresh.stats, kept.token_ids, fresh.token_ids))
        ids = [*ids, *kept.token_ids]
    return turns


def _cpp(binary: Path, target: Path, draft: Path, runner: TextLLMRunner, new_tokens: int):  # type: ignore[no-untyped-def]
    cmd = [str(binary), "--target", str(target), "--draft", str(draft), "--serve"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(ids: list[int], reuse: bool) -> dict[str, Any]:
        request = {"prompt_ids": ids, "max_new_tokens": new_tokens, "ignore_eos": True}
        proc.stdin.write(json.dumps({**request, "reuse_prefix": reuse}) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    ids: list[int] = []
    turns = []
    for k in range(len(TURNS)):
        ids = [*ids, *_turn_ids(runner, k)]
        kept, fresh = ask(ids, True), ask(ids, False)
        turns.append(
            _record(len(ids), kept["stats"], fresh["stats"], kept["token_ids"], fresh["token_ids"])
        )
        ids = [*ids, *kept["token_ids"]]
    proc.stdin.close()
    proc.wait()
    return turns


def _record(prompt: int, kept: Any, fresh: Any, kept_ids: list[int], fresh_ids: list[int]):  # type: ignore[no-untyped-def]
    get = (lambda s, k: s[k]) if isinstance(kept, dict) else getattr
    return {
        "prompt_tokens": prompt,
        "cached_tokens": get(kept, "cached_tokens"),
        "kept_ttft_s": get(kept, "ttft_s"),
        "fresh_ttft_s": get(fresh, "ttft_s"),
        "kept_total_s": get(kept, "total_s"),
        "fresh_total_s": get(fresh, "total_s"),
        "identical": kept_ids == fresh_ids,
        "kept_ids": kept_ids,
        "fresh_ids": fresh_ids,
    }


def _summary(runs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    last = [r[-1]["kept_ttft_s"] / r[0]["kept_ttft_s"] for r in runs]
    fresh = [r[-1]["fresh_ttft_s"] / r[0]["fresh_ttft_s"] for r in runs]
    return {
        "turn5_over_turn1_kept": last,
        "turn5_over_turn1_fresh": fresh,
        "mean_kept": statistics.mean(last),
        "mean_fresh": statistics.mean(fresh),
        "identical_turns": sum(t["identical"] for r in runs for t in r),
        "turns": sum(len(r) for r in runs),
    }


@click.command()
@click.option("--target", type=click.Path(path_type=Path), default=EXPORTS / "target-default.pte")
@click.option("--draft", type=click.Path(path_type=Path), default=EXPORTS / "draft-shipped.pte")
@click.option("--new-tokens", type=int, default=100)
@click.option("--runs", type=int, default=3)
@click.option("--cpp-runner", type=click.Path(path_type=Path), default=None)
@click.option("--json", "out", type=click.Path(path_type=Path), required=True)
def main(
    target: Path, draft: Path, new_tokens: int, runs: int, cpp_runner: Path | None, out: Path
) -> None:
    _, runner = load_runners(RunnerSpec(target, draft))
    assert runner is not None
    settings = {"new_tokens": new_tokens, "runs": runs, "turns": TURNS}
    report: dict[str, Any] = {
        "manifest": manifest(settings, {"target": target, "draft": draft}),
        "python": [_python(runner, new_tokens) for _ in range(runs)],
    }
    report["python_summary"] = _summary(report["python"])
    if cpp_runner is not None:
        report["cpp"] = [_cpp(cpp_runner, target, draft, runner, new_tokens) for _ in range(runs)]
        report["cpp_summary"] = _summary(report["cpp"])
    out.write_text(json.dumps(report, indent=1) + "\n")
    for side in ("python", "cpp"):
        if f"{side}_summary" in report:
            s = report[f"{side}_summary"]
            click.echo(
                f"{side}: turn 5 / turn 1 time to first token {s['mean_kept']:.2f}x kept, "
                f"{s['mean_fresh']:.2f}x fresh; identical {s['identical_turns']}/{s['turns']}"
            )


if __name__ == "__main__":
    main()
