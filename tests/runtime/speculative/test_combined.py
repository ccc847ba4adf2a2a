"""The combined drafter (``--draft-method combined``): prompt lookup's offer and the model
draft's shapes, both following every committed token; the dispatcher chooses between them
(test_dispatcher.py). Greedy exactness is in test_greedy_equivalence.py, sampled exactness in
test_sampling.py; here, the drafter and the default method."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from helpers import pair_programs, runners

from etspec.contract import LOOKUP_LABEL
from etspec.runtime.sampling import Sampler, SamplingConfig
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.combined import CombinedDraftRunner
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.runtime.speculative.settings import tree_policy
from etspec.runtime.speculative.shapes import ChainShape, TreeShape
from etspec.runtime.speculative.step import Acceptance, Offer, Proposal

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


def _combined(history: list[int]) -> CombinedDraftRunner:
    runner = CombinedDraftRunner(_Model(), PromptLookupDraftRunner(100))
    runner.prefill(history[:-1], history[-1], None)
    return runner


def test_the_lookup_is_offered_and_the_model_proposes() -> None:
    runner = _combined([1, 2, 3, 9, 1, 2, 3])
    offer = runner.offer(7)
    # What followed the latest 3-gram match, up to the end, then again (the text as a loop).
    assert offer == Offer([9, 1, 2, 3, 9, 1, 2], "ngram3")
    assert runner.offer(2) == Offer([9, 1], "ngram3")
    assert runner.propose(CHAIN, 20, GREEDY).tokens == [0, 0, 0]
    assert isinstance(runner.model, _Model) and runner.model.proposals == 1
    # Both follow what is committed: the lookup's history grows by the accepted path.
    runner.accept(Acceptance(7, [3, 9], [0, 1], 4, None))
    assert runner.lookup.history[-3:] == [3, 9, 4]
    assert _combined([1, 2, 3, 4, 5]).offer(7) is None  # no token repeats: nothing to offer
    assert runner.offers and runner.has_model and not runner.lookup.has_model


def test_seeded_sampling_repeats_whatever_ran_before(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    combined = CombinedDraftRunner(Eagle3DraftRunner(draft), PromptLookupDraftRunner(16))
    # A fixed chain weighed against the lookup's offers, as `--tree chain` sets it up.
    policy = tree_policy(TreeSettings("chain", num_spec_tokens=3), target.metadata, combined)
    _, spec = runners(target, combined, policy)
    prompt = [1, 5, 3, 7, 1, 5, 3]
    cfg = SamplingConfig(0.9, seed=11)
    first = spec.generate(prompt, 40, cfg, ignore_eos=True)
    for seed in range(5):  # other requests, greedy and sampled, teach the shared estimates
        spec.generate([2, 4, 6, 2, 4], 30, SamplingConfig(0.9, seed=seed), ignore_eos=True)
        spec.generate([3, 3, 3], 30, ignore_eos=True)
    again = spec.generate(prompt, 40, cfg, ignore_eos=True)
    # Coupled sampling: the seed fixes the text, whatever the dispatcher chose this time
    # (it learned from the requests between), and it is target-only decoding's text.
    assert again.token_ids == first.token_ids
    base, _ = runners(target)
    assert base.generate(prompt, 40, cfg, ignore_eos=True).token_ids == first.token_ids
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
