"""The combined drafter (``--draft-method combined``): each step, prompt lookup's chain or the
model draft's shape, whichever is expected to emit more tokens per second. Greedy exactness
is in test_greedy_equivalence.py, sampled exactness in test_sampling.py; here, the choice."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
import torch
from helpers import pair_programs, runners

from etspec.contract import LOOKUP_LABEL
from etspec.runtime.sampling import Sampler, SamplingConfig
from etspec.runtime.speculative.combined import CombinedDraftRunner, lookup_tokens
from etspec.runtime.speculative.dispatcher import AutoTree, DepthAcceptance
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.runtime.speculative.shapes import ChainShape, TreeShape
from etspec.runtime.speculative.step import Acceptance, Proposal, StepOutcome

GREEDY = Sampler(SamplingConfig())
CHAIN = ChainShape(3)


class _Model(SpeculativeDraftRunner):
    """A stand-in model drafter: proposes token 0 three times, counts its calls."""

    def __init__(self) -> None:
        self.proposals = 0

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        return 0

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        self.proposals += 1
        return Proposal.chain([0] * min(3, max_height))

    def accept(self, acceptance: Acceptance) -> int:
        return 0

    def reset(self) -> None:
        pass


class _Meta:
    verify_widths = (4, 8)


def _combined(history: list[int]) -> CombinedDraftRunner:
    runner = CombinedDraftRunner(_Model(), PromptLookupDraftRunner(100))
    runner.widths = _Meta.verify_widths
    runner.prefill(history[:-1], history[-1], None)
    return runner


def _steps(runner: CombinedDraftRunner, steps: int, lookup_accepts, model_accepts, seconds):  # type: ignore[no-untyped-def]
    """Run ``steps`` proposals with the accepted counts the callables give; returns how many
    the lookup proposed."""
    used = 0
    for _ in range(steps):
        p = runner.propose(CHAIN, 20, GREEDY)
        lookup = p.label == LOOKUP_LABEL
        used += lookup
        accepted = min(len(p.tokens), lookup_accepts() if lookup else model_accepts())
        runner.observe(StepOutcome(len(p.tokens), accepted, seconds(lookup, len(p.tokens))))
    return used


def test_a_reliable_lookup_wins_and_an_unreliable_one_is_dropped() -> None:
    # The history repeats, so the lookup always finds a 3-gram and a 7-token continuation.
    history = [1, 2, 3, 4, 5, 6, 7, 8, 9] * 3
    same_time = lambda lookup, n: 1.0  # noqa: E731
    good = _combined(history)
    used = _steps(good, 200, lambda: 7, lambda: 1, same_time)
    assert used > 180  # all 7 accepted against the model's 1 of 3
    bad = _combined(history)
    used = _steps(bad, 200, lambda: 0, lambda: 2, same_time)
    assert used < 20  # tried, refuted, retried rarely
    # What the lookup costs decides too: as accurate as the model but 3x slower per step.
    rng = random.Random(0)
    slow = _combined(history)
    used = _steps(slow, 300, lambda: rng.randint(1, 3), lambda: rng.randint(1, 3),
                  lambda lookup, n: 3.0 if lookup else 1.0)  # fmt: skip
    assert used < 40


def test_unreached_depths_borrow_the_deepest_reached_one() -> None:
    never = DepthAcceptance()
    assert lookup_tokens(None, 15, 3.0) == 16  # never tried: every depth could be accepted
    for _ in range(50):
        never.observe(15, 0)  # 50 steps, each rejected at the first token
    # Depths 2..15 were never reached; they are as unlikely as depth 1, not sure things.
    assert lookup_tokens(never, 15, 2.0) < 1.1
    assert never.expected_tokens(15, 2.0) < 1.1  # the chains' bound agrees
    always = DepthAcceptance()
    for _ in range(50):
        always.observe(15, 15)
    assert lookup_tokens(always, 15, 2.0) > 15


def test_without_a_match_the_model_drafts() -> None:
    runner = _combined([1, 2, 3, 4, 5])  # no token repeats: nothing to look up
    model = runner.model
    assert isinstance(model, _Model)
    for _ in range(5):
        assert runner.propose(CHAIN, 20, GREEDY).label is None
        runner.observe(StepOutcome(3, 0, 1.0))
    assert model.proposals == 5


def test_lookup_acceptance_is_learned_per_matched_ngram() -> None:
    # 3-gram matches are always right and 1-gram matches never, on the same text: the
    # choice must follow the match, not a pooled average.
    runner = _combined([1, 2, 3, 9, 1, 2, 3])
    lookup = runner.lookup
    for _ in range(300):
        n, _ = lookup.match(7)
        p = runner.propose(CHAIN, 20, GREEDY)
        accepted = (len(p.tokens) if n == 3 else 0) if p.label else 1
        runner.observe(StepOutcome(len(p.tokens), min(accepted, len(p.tokens)), 1.0))
        # Alternate the history's tail between a 3-gram match and a 1-gram one.
        lookup.history = [1, 2, 3, 9, 1, 2, 3] if lookup.history[-1] == 2 else [1, 2, 3, 9, 2]
    three, one = runner.learned.lookup[3], runner.learned.lookup[1]
    assert three.reached[0] > 100 and one.reached[0] < 30


def test_auto_learns_nothing_about_a_shape_from_a_lookup_step() -> None:
    auto = AutoTree([ChainShape(2), ChainShape(4)], (4, 8))
    auto.observe(ChainShape(2), StepOutcome(2, 2, 1.0, 2, follows_shape=False))
    assert auto.records["chain2"].steps == 0 and not auto.chains.reached
    auto.observe(ChainShape(2), StepOutcome(2, 2, 1.0, 2))
    assert auto.records["chain2"].steps == 1 and auto.chains.reached == [1, 1]


def test_seeded_sampling_repeats_whatever_ran_before(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    combined = CombinedDraftRunner(Eagle3DraftRunner(draft), PromptLookupDraftRunner(16))
    _, spec = runners(target, combined, 3)
    prompt = [1, 5, 3, 7, 1, 5, 3]
    cfg = SamplingConfig(0.9, seed=11)
    first = spec.generate(prompt, 40, cfg, ignore_eos=True)
    for seed in range(5):  # other requests, greedy and sampled, teach the shared estimates
        spec.generate([2, 4, 6, 2, 4], 30, SamplingConfig(0.9, seed=seed), ignore_eos=True)
        spec.generate([3, 3, 3], 30, ignore_eos=True)
    again = spec.generate(prompt, 40, cfg, ignore_eos=True)
    assert again.token_ids == first.token_ids
    assert again.stats.shape_steps == first.stats.shape_steps
    assert first.stats.shape_steps.get(LOOKUP_LABEL, 0) > 0


def test_default_method_combines_with_a_draft_and_is_target_only_without(artifacts) -> None:  # type: ignore[no-untyped-def]
    """No --draft-method: both drafters where a draft is given (a repeating prompt makes the
    lookup propose), target-only where none is, and the same with the method named."""
    pair = artifacts.small_draft()
    prompt = ",".join(map(str, [1, 5, 3, 7, 1, 5, 3, 7, 1, 5, 3]))
    base = [sys.executable, "-m", "etspec", "generate", "--target", str(pair.target.pte),
            "--prompt-ids", prompt, "--max-new-tokens", "24", "--ignore-eos", "--json"]  # fmt: skip
    runs = {}
    for name, extra in {
        "default": ["--draft", str(pair.pte)],
        "named": ["--draft", str(pair.pte), "--draft-method", "combined"],
        "no draft": [],
        "named, no draft": ["--draft-method", "combined"],
    }.items():
        proc = subprocess.run([*base, *extra], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        runs[name] = json.loads(proc.stdout)
    assert runs["default"]["token_ids"] == runs["named"]["token_ids"]
    assert runs["default"]["stats"]["shape_steps"].get(LOOKUP_LABEL, 0) > 0
    for name in ("no draft", "named, no draft"):
        assert runs[name]["stats"]["verify_calls"] == 0
        assert runs[name]["token_ids"] == runs["default"]["token_ids"]  # greedy: lossless


@pytest.mark.parametrize("flag", [["--max-ngram", "2"], ["--draft-window", "4"]])
def test_combined_takes_both_drafters_options(flag: list[str], artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.small_draft()
    proc = subprocess.run(
        [sys.executable, "-m", "etspec", "generate", "--target", str(pair.target.pte),
         "--draft", str(pair.pte), "--draft-method", "combined", "--prompt-ids",
         "1,5,3,7,1,5", "--max-new-tokens", "8", *flag],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
