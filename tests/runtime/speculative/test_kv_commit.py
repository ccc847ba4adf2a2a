"""Committed target KV == KV of sequentially decoding the committed tokens, after every step
(DESIGN invariant 2), for all-accepted, all-rejected and mixed steps, both KV strategies.

Eager: tensors compared directly. ``.pte``: through the logits of every later step. Each
check is shown able to fail by a commit that silently does nothing.
"""

from __future__ import annotations

import pytest
import torch
from helpers import (
    ScriptedDraftRunner,
    decode,
    oracle,
    pair_programs,
    runners,
    target_program,
)

from etspec.contract import TARGET_COMMIT, TARGET_RESET
from etspec.runtime.speculative.kv_cache import KVInvariantError

KV = ["position-overwrite", "scratch-commit"]
SCHEDULES = {
    "all-accepted": lambda s: 99,
    "all-rejected": lambda s: 0,  # the first draft token is wrong: the off-by-one case
    "mixed": lambda s: [99, 0, 2, 1][s % 4],
}
PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]  # longer than one prefill chunk (8)
NEW = 30
KV_ATOL = 1e-5  # verify (K rows) vs decode (1 row) kernels: float32 summation order only


def _sequential_kv(checkpoint_target, tokens: list[int]) -> list[torch.Tensor]:
    checkpoint_target.run(TARGET_RESET)
    for pos, tok in enumerate(tokens):
        decode(checkpoint_target, tok, pos)
    return checkpoint_target.cache_tensors()


def _drop_commits(program, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A commit that silently does nothing (the rollback bug of other runtimes)."""
    real = program.run

    def run(method, *inputs):  # type: ignore[no-untyped-def]
        if method == TARGET_COMMIT:
            return (inputs[1],)
        return real(method, *inputs)

    monkeypatch.setattr(program, "run", run)


@pytest.fixture(scope="module")
def eager_pair(artifacts):  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    target, _ = pair_programs(case, "eager")
    sequential, _ = pair_programs(case, "eager")
    return target, sequential


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("kv", KV)
def test_eager_committed_kv_after_every_step(eager_pair, kv: str, schedule: str) -> None:
    target, sequential = eager_pair
    base, _ = runners(target)
    ref = base.generate(PROMPT, NEW, ignore_eos=True)
    full = [*PROMPT, *ref.token_ids]
    checked: list[int] = []

    def check(acc) -> None:  # type: ignore[no-untyped-def]
        committed = acc.position + len(acc.tokens)
        want = _sequential_kv(sequential, full[:committed])
        for live, expected in zip(target.cache_tensors(), want, strict=True):
            torch.testing.assert_close(
                live[:, :committed], expected[:, :committed], atol=KV_ATOL, rtol=0
            )
        checked.append(committed)

    draft = ScriptedDraftRunner(oracle(PROMPT, ref.token_ids), 16, SCHEDULES[schedule], check)
    _, spec = runners(target, draft, 4, kv)
    out = spec.generate(PROMPT, NEW, ignore_eos=True)
    assert out.token_ids == ref.token_ids
    st = out.stats
    # Every step but the last, which ends it (the budget's last token is a plain decode).
    assert len(checked) == st.verify_calls + st.shape_steps.get("none", 0) - 1
    assert checked == sorted(set(checked))  # committed length only grows
    if schedule == "all-accepted":
        assert st.accepted_tokens == st.drafted_tokens > 0
    elif schedule == "all-rejected":
        assert st.accepted_tokens == 0 and st.drafted_tokens > 0
    else:
        assert 0 < st.accepted_tokens < st.drafted_tokens


@pytest.mark.parametrize("kv", KV)
def test_reference_mode_catches_a_commit_that_does_nothing(eager_pair, kv, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    target, _ = eager_pair
    base, _ = runners(target)
    ref = base.generate(PROMPT, NEW, ignore_eos=True)
    draft = ScriptedDraftRunner(oracle(PROMPT, ref.token_ids), 16, SCHEDULES["mixed"])
    _, spec = runners(target, draft, 4, kv)
    _drop_commits(target, monkeypatch)
    if kv == "position-overwrite":
        # A chain's accepted path is already in place: no commit is ever needed.
        assert spec.generate(PROMPT, NEW, ignore_eos=True).token_ids == ref.token_ids
    else:
        with pytest.raises(KVInvariantError, match="did not land"):
            spec.generate(PROMPT, NEW, ignore_eos=True)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("kv", KV)
def test_pte_committed_kv_through_logits(artifacts, kv: str, schedule: str) -> None:
    target = target_program(artifacts.small_draft().target, "pte")
    base, _ = runners(target)
    ref = base.generate(PROMPT, NEW, ignore_eos=True, record_logits=True)
    draft = ScriptedDraftRunner(oracle(PROMPT, ref.token_ids), 16, SCHEDULES[schedule])
    _, spec = runners(target, draft, 4, kv)
    out = spec.generate(PROMPT, NEW, ignore_eos=True, record_logits=True)
    assert out.token_ids == ref.token_ids
    # Every emitted token's logits were computed over the committed KV of that moment.
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-4, rtol=0)


def test_pte_logit_check_catches_a_commit_that_does_nothing(artifacts, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    target = target_program(artifacts.small_draft().target, "pte")
    base, _ = runners(target)
    ref = base.generate(PROMPT, NEW, ignore_eos=True, record_logits=True)
    draft = ScriptedDraftRunner(oracle(PROMPT, ref.token_ids), 16, SCHEDULES["all-accepted"])
    _, spec = runners(target, draft, 4, "scratch-commit")
    _drop_commits(target, monkeypatch)
    out = spec.generate(PROMPT, NEW, ignore_eos=True, record_logits=True)
    assert (out.logits - ref.logits).abs().max() > 1e-2
