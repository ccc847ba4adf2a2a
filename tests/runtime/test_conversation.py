"""Conversations that keep their KV cache: a request sharing a prefix with what the cache
holds prefills only the rest, and gives the tokens a fresh prefill gives, in every tree
mode, both KV strategies, target-only, and across runners sharing one load."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
from pathlib import Path

import pytest
import torch

from etspec.runtime.results import GenerationResult
from etspec.runtime.runner import TextLLMRunner, load_runners
from etspec.runtime.spec import RunnerSpec, TreeSettings

TURNS = 5


def _conversation(
    runner: TextLLMRunner, vocab: int, seed: int, reuse: bool, user: int = 6, new: int = 12
) -> list[GenerationResult]:
    """Five turns: each prompt is the last prompt, its answer and a new user turn."""
    runner.reset()  # the first turn starts from nothing held
    rng = random.Random(seed)
    ids = [rng.randrange(vocab) for _ in range(8)]
    results = []
    for _ in range(TURNS):
        result = runner.generate(ids, new, ignore_eos=True, reuse_prefix=reuse)
        results.append(result)
        ids = [*ids, *result.token_ids, *(rng.randrange(vocab) for _ in range(user))]
    return results


def _check_reused(results: list[GenerationResult]) -> None:
    """Every turn after the first reused at least its previous prompt, at most that prompt
    and its answer, and prefilled only the rest."""
    assert results[0].stats.cached_tokens == 0
    for before, now in itertools.pairwise(results):
        cached = now.stats.cached_tokens
        assert len(before.prompt_ids) <= cached <= len(before.prompt_ids) + len(before.token_ids)
        chunk = 8  # the tiny targets' prefill_chunk
        assert now.stats.prefill_calls == -(-(len(now.prompt_ids) - cached) // chunk)


MODES = [
    ("chain", "position-overwrite"),
    ("static", "position-overwrite"),
    ("dynamic", "scratch-commit"),
    ("static", "scratch-commit"),
    ("auto", "position-overwrite"),
    ("chain", "scratch-commit"),
]


@pytest.mark.parametrize(("tree", "kv"), MODES, ids=[f"{t}-{k}" for t, k in MODES])
def test_turns_after_the_first_prefill_only_what_is_new(artifacts, tree: str, kv: str) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    spec = RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings(tree, 4), kv_strategy=kv)
    base, runner = load_runners(spec)
    assert runner is not None
    vocab = base.meta.vocab_size
    fresh = _conversation(runner, vocab, seed=3, reuse=False)
    kept = _conversation(runner, vocab, seed=3, reuse=True)
    assert [r.token_ids for r in kept] == [r.token_ids for r in fresh]
    _check_reused(kept)
    target_only = _conversation(base, vocab, seed=3, reuse=True)
    assert [r.token_ids for r in target_only] == [r.token_ids for r in fresh]
    _check_reused(target_only)


def test_a_sliding_target_and_its_draft_keep_their_conversation(artifacts) -> None:  # type: ignore[no-untyped-def]
    """Gemma 3's sliding layers (a 12-token window the turns cross) and an EAGLE-3 draft fed
    the kept hidden states of the turns before."""
    pair = artifacts.gemma_draft("gemma3_sliding")
    base, runner = load_runners(RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings("chain")))
    assert runner is not None
    vocab = base.meta.vocab_size
    draft = runner.generator.draft  # type: ignore[attr-defined]
    seen: list[torch.Tensor] = []
    prefill = draft.prefill

    def recording(prompt: list[int], first: int, hidden: torch.Tensor | None) -> int:
        assert hidden is not None and hidden.shape[0] == len(prompt)
        seen.append(hidden.clone())
        return prefill(prompt, first, hidden)

    draft.prefill = recording
    fresh = _conversation(runner, vocab, seed=5, reuse=False, user=5, new=10)
    kept = _conversation(runner, vocab, seed=5, reuse=True, user=5, new=10)
    assert [r.token_ids for r in kept] == [r.token_ids for r in fresh]
    _check_reused(kept)
    # The draft is fed the whole prompt's states: the kept rows (written by the turns'
    # decode and verify calls) are the states a fresh prefill computes, to float tolerance.
    for a, b in zip(seen[:TURNS], seen[TURNS:], strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4), (a - b).abs().max()


def test_what_another_runner_or_a_reset_wrote_is_not_reused(artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    base, runner = load_runners(RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings("chain")))
    assert runner is not None
    first = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    want = runner.generate([*first, 7, 7], 10, ignore_eos=True).token_ids
    runner.generate(first, 10, ignore_eos=True)
    # The target-only runner over the same load overwrites all but the first four tokens
    # (it keeps no hidden states: the draft's runner may reuse only what it left).
    base.generate([3, 1, 4, 1, 8, 8, 8], 20, ignore_eos=True, reuse_prefix=True)
    again = runner.generate([*first, 7, 7], 10, ignore_eos=True, reuse_prefix=True)
    assert again.token_ids == want
    assert again.stats.cached_tokens == 4
    runner.reset()
    after_reset = runner.generate([*first, 7, 7], 10, ignore_eos=True, reuse_prefix=True)
    assert after_reset.token_ids == want
    assert after_reset.stats.cached_tokens == 0


def test_a_request_that_failed_midway_leaves_only_its_reused_prefix(artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    _, runner = load_runners(RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings("chain")))
    assert runner is not None
    prompt = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]
    want = runner.generate([*prompt, 5], 16, ignore_eos=True).token_ids
    runner.generate(prompt[:6], 4, ignore_eos=True)

    def fail(ids: list[int], text: str) -> bool:
        raise RuntimeError("the app's callback failed")

    with pytest.raises(RuntimeError):
        runner.generate(prompt, 16, ignore_eos=True, callback=fail, reuse_prefix=True)
    got = runner.generate([*prompt, 5], 16, ignore_eos=True, reuse_prefix=True)
    assert got.token_ids == want
    assert got.stats.cached_tokens == 6  # what the failed request reused, nothing it wrote


def test_the_same_prompt_again_prefills_its_last_token(artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    _, runner = load_runners(RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings("chain")))
    assert runner is not None
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    want = runner.generate(prompt, 8, ignore_eos=True)
    again = runner.generate(prompt, 8, ignore_eos=True, reuse_prefix=True)
    assert again.token_ids == want.token_ids
    assert again.stats.cached_tokens == len(prompt) - 1
    assert again.stats.prefill_calls == 1


CPP_MODES = [
    ("chain", "position-overwrite"),
    ("static", "scratch-commit"),
    ("dynamic", None),
    ("auto", "scratch-commit"),
]


@pytest.mark.parametrize(("tree", "kv"), CPP_MODES, ids=[t for t, _ in CPP_MODES])
def test_the_cpp_runner_keeps_its_conversation(
    artifacts, runner_bin: Path, tree: str, kv: str | None
) -> None:  # type: ignore[no-untyped-def]
    """`--serve` requests with reuse_prefix: the Python runner's tokens, fresh, turn by
    turn; target-only too (no --draft)."""
    pair = artifacts.tree_draft()
    spec = RunnerSpec(
        pair.target.pte, pair.pte, tree=TreeSettings(tree, 4),
        kv_strategy=kv or "position-overwrite",
    )  # fmt: skip
    base, runner = load_runners(spec)
    assert runner is not None
    fresh = _conversation(runner, base.meta.vocab_size, seed=11, reuse=False)
    args = ["--draft", str(pair.pte), "--tree", tree, "--num-spec-tokens", "4"]
    args += ["--kv", kv] if kv else []
    for draft_args, want in ((args, fresh), ([], fresh)):
        cmd = [str(runner_bin), "--target", str(pair.target.pte), "--serve", *draft_args]
        lines = []
        for result in want:
            request = {"prompt_ids": result.prompt_ids, "max_new_tokens": 12}
            lines.append(json.dumps({**request, "ignore_eos": True, "reuse_prefix": True}))
        out = subprocess.run(
            cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        answers = [json.loads(line) for line in out.stdout.splitlines()]
        assert [a["token_ids"] for a in answers] == [r.token_ids for r in want]
        cached = [a["stats"]["cached_tokens"] for a in answers]
        assert cached[0] == 0
        for before, n in zip(want, cached[1:], strict=False):
            assert len(before.prompt_ids) <= n <= len(before.prompt_ids) + len(before.token_ids)
