"""The drafter-only window (EAGLE-Pangu Table 3's ablation): what the draft may attend to,
and that output stays exact because only the draft is truncated."""

from __future__ import annotations

import pytest
import torch
from helpers import check_greedy_equivalence, max_diff, pair_programs, random_prompts, runners

from etspec.contract import DRAFT_STEP, MASK_MIN
from etspec.errors import EtspecError
from etspec.runtime.prefill import prefill_target
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.static_tree import StaticTree


def test_windowed_root_equals_a_draft_that_only_saw_the_window(artifacts) -> None:  # type: ignore[no-untyped-def]
    """RoPE attention depends on relative positions only, so the first proposal's root under
    window W equals that of a draft prefilled with just the last W rows (tolerance 1e-4)."""
    target, draft = pair_programs(artifacts.draft(), "eager", step_width=4)
    vocab = target.metadata.vocab_size
    prompt = torch.randint(0, vocab, (21,), generator=torch.Generator().manual_seed(3)).tolist()
    window = 6
    target.run("target_reset")
    pre = prefill_target(target, torch.tensor(prompt))
    first = int(pre.logits.argmax())

    windowed = Eagle3DraftRunner(draft, window=window)
    windowed.reset()
    windowed.prefill(prompt, first, pre.hidden)
    windowed.catch_up()  # the prefill waits for the first proposal: run it now
    root = windowed.root.logits[0].clone()

    alone = Eagle3DraftRunner(draft)
    alone.reset()
    alone.prefill(prompt[-window:], first, pre.hidden[-window:])
    alone.catch_up()
    assert max_diff(root, alone.root.logits[0]) < 1e-4

    alone.reset()
    alone.prefill(prompt, first, pre.hidden)
    alone.catch_up()
    assert max_diff(root, alone.root.logits[0]) > 1e-3  # the window changed what it saw


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
def test_windowed_draft_sees_only_the_window_and_output_stays_exact(artifacts, kv: str) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.tree_draft(), "pte", step_width=4)
    window = 5
    scratch = draft.metadata.cache_size - draft.metadata.max_context
    seen: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    real = draft.run

    def run(method, *inputs):  # type: ignore[no-untyped-def]
        if method == DRAFT_STEP or method.startswith("draft_extend"):
            # The committed columns: all but the mask's last `scratch` (models/methods.py).
            committed = inputs[-1][:, : inputs[-1].shape[1] - scratch]
            seen.append((method, inputs[2].clone(), committed.clone()))
        return real(method, *inputs)

    draft.run = run  # type: ignore[method-assign]
    prompts = random_prompts(4, 16, 30, seed=11)
    prompts = [p * 3 for p in prompts]  # 3..90 tokens: most are longer than the window
    budgets = [20, 14, 25, 9]
    for shape in (3, StaticTree.parse("N12"), DynamicTree(depth=3, topk=2, total_tokens=8)):
        base, spec = runners(target, Eagle3DraftRunner(draft, window=window), shape, kv)
        check_greedy_equivalence(f"window {shape}", base, spec, prompts, budgets)

    truncated = 0
    for method, positions, mask in seen:
        # Rows of a draft_step are tree nodes at root position + depth - 1 over a committed
        # prefix that ends at the root position (depth-1 nodes and pad rows sit there); an
        # extend row sees its own slot too.
        committed = int(positions.min())
        for p, row in zip(positions.tolist(), mask, strict=True):
            end = committed if method == DRAFT_STEP else p + 1
            visible = (row == 0).nonzero().flatten().tolist()
            assert visible == list(range(max(0, p - window + 1), end)), (method, p, visible)
            assert bool((row[end:] == MASK_MIN).all())
            truncated += p >= window
    assert truncated > 50


def test_window_must_be_positive(artifacts) -> None:  # type: ignore[no-untyped-def]
    _, draft = pair_programs(artifacts.draft(), "pte")
    with pytest.raises(EtspecError, match="draft window must be at least 1 token, got 0"):
        Eagle3DraftRunner(draft, window=0)


def test_the_prefill_waits_for_the_first_proposal(artifacts) -> None:  # type: ignore[no-untyped-def]
    """A request whose steps never draft (a draft that does not pay here) runs no draft
    call: the prefill is queued and runs with the first catch-up, to the same root."""
    target, draft = pair_programs(artifacts.draft(), "eager", step_width=4)
    prompt = torch.randint(0, target.metadata.vocab_size, (13,),
                           generator=torch.Generator().manual_seed(5)).tolist()  # fmt: skip
    target.run("target_reset")
    pre = prefill_target(target, torch.tensor(prompt))
    first = int(pre.logits.argmax())
    runner = Eagle3DraftRunner(draft)
    runner.reset()
    calls: list[str] = []
    run = draft.run
    draft.run = lambda method, *a: calls.append(method) or run(method, *a)  # type: ignore[method-assign]
    assert runner.prefill(prompt, first, pre.hidden) == 0 and calls == []
    chunks = -(-len(prompt) // draft.metadata.prefill_chunk)
    assert runner.catch_up() == chunks and calls == ["draft_prefill"] * chunks
    assert runner.catch_up() == 0 and len(calls) == chunks
    root = runner.root.logits[0].clone()
    draft.run = run  # type: ignore[method-assign]
    again = Eagle3DraftRunner(draft)
    again.reset()
    again.prefill(prompt, first, pre.hidden)
    assert torch.equal(again.expansion().root_logits, root)
