"""Greedy speculative output == target-only output, token for token (DESIGN invariant 1).

20 prompts x num-spec-tokens {1, 3, 5} x {position-overwrite, scratch-commit} x {pte, eager}
on the 16-token pair, whose random draft is right often enough for mixed steps and whose
EOS (id 2) often lands inside a multi-token window. Every output bit-identical (no
near-tie allowance: fp32 programs).
"""

from __future__ import annotations

import pytest
from helpers import (
    ScriptedDraftRunner,
    Truth,
    check_greedy_equivalence,
    pair_programs,
    random_prompts,
    runners,
)

from etspec.contract import LOOKUP_LABEL
from etspec.runtime.speculative.combined import CombinedDraftRunner
from etspec.runtime.speculative.dispatcher import Dispatcher
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.runtime.speculative.shapes import ChainShape
from etspec.tools.validate import compare

PROMPTS = random_prompts(20, vocab=16, longest=20)
# Budgets vary so max_new_tokens also falls inside windows.
BUDGETS = [5 + (7 * i) % 24 for i in range(20)]


@pytest.fixture(scope="module", params=["pte", "eager"])
def small_pair(request, artifacts):  # type: ignore[no-untyped-def]
    return request.param, pair_programs(artifacts.small_draft(), request.param)


def _draft(kind: str, draft_program, switch: Truth):  # type: ignore[no-untyped-def]
    if kind == "eagle3":
        return Eagle3DraftRunner(draft_program)
    if kind == "prompt-lookup":
        return PromptLookupDraftRunner(16)
    if kind == "combined":
        return CombinedDraftRunner(Eagle3DraftRunner(draft_program), PromptLookupDraftRunner(16))
    return ScriptedDraftRunner(switch, 16, schedule=lambda s: [99, 0, 1][s % 3])


# The combined drafter runs EAGLE-3's and prompt lookup's own paths: one chain length
# checks how it switches between them (the test costs seconds per case).
CASES = [
    (kind, k)
    for kind in ("eagle3", "prompt-lookup", "combined", "scripted")
    for k in (1, 3, 5)
    if kind != "combined" or k == 3
]


@pytest.mark.parametrize(("kind", "k"), CASES)
@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
def test_greedy_equals_target_only(small_pair, k: int, kv: str, kind: str) -> None:
    mode, (target, draft) = small_pair
    switch = Truth()
    policy: int | Dispatcher = k
    if kind == "combined":  # the chain weighed against the lookup's offers (tree_policy)
        widths = target.metadata.verify_widths
        policy = Dispatcher([ChainShape(k)], widths, decode=False, lookup=True)
    base, spec = runners(target, _draft(kind, draft, switch), policy, kv)
    label = f"{mode} {kind} k={k} {kv}"
    accepted = rejected = eos_in_window = budget_in_window = 0
    steps: dict[str, int] = {}
    for out, _ in check_greedy_equivalence(label, base, spec, PROMPTS, BUDGETS, switch):
        accepted += out.stats.accepted_tokens
        rejected += out.stats.rejected_tokens
        eos_in_window += out.stop_reason == "eos" and out.last_offered > 1
        budget_in_window += out.stop_reason == "max_new_tokens" and out.last_emission > 1
        for name, n in out.stats.shape_steps.items():
            steps[name] = steps.get(name, 0) + n
    # The suite must exercise what it claims to: mixed steps, and (with the scripted
    # draft) EOS and max_new_tokens landing inside multi-token windows.
    if kind != "prompt-lookup":
        assert accepted > 0 and rejected > 0
    if kind == "combined":  # both drafters proposed, so both paths were checked
        assert steps.get(LOOKUP_LABEL, 0) > 0 and sum(steps.values()) > steps[LOOKUP_LABEL]
    if kind == "scripted" and k > 1:
        assert eos_in_window > 0 and budget_in_window > 0


def test_prompt_lookup_greedy_equals_target_only(artifacts) -> None:  # type: ignore[no-untyped-def]
    """The model-free runner on the XNNPACK target (verify width 16, chain of 8)."""
    from helpers import target_program

    case = artifacts.target("llama_gqa_rope3")
    target = target_program(case, "pte")
    for kv in ("position-overwrite", "scratch-commit"):
        base, spec = runners(target, PromptLookupDraftRunner(256), 8, kv)
        accepted = 0
        for i, prompt in enumerate(random_prompts(8, vocab=256, longest=30, seed=3)):
            ref = base.generate(prompt, 40, record_logits=True, ignore_eos=True)
            out = spec.generate(prompt, 40, ignore_eos=True)
            assert compare(i, ref.token_ids, out.token_ids, ref.logits).diverge_at is None
            accepted += out.stats.accepted_tokens
        assert accepted > 0


def test_a_step_with_nothing_proposed_runs_decode(artifacts) -> None:  # type: ignore[no-untyped-def]
    """A lookup that finds nothing is the one-row decode, not the narrowest verify, and the
    output stays target-only's under both KV strategies (scratch-commit must then not move a
    stale scratch entry over the root's slot)."""
    from helpers import target_program

    from etspec.contract import TARGET_DECODE

    case = artifacts.target("llama_gqa_rope3")
    target = target_program(case, "pte")
    calls: list[str] = []
    run = target.run

    def recorded(method: str, *inputs):  # type: ignore[no-untyped-def]
        calls.append(method)
        return run(method, *inputs)

    target.run = recorded  # type: ignore[method-assign]
    prompt = list(range(40, 70))  # no repeated token: the first lookups find nothing
    try:
        for kv in ("position-overwrite", "scratch-commit"):
            base, spec = runners(target, PromptLookupDraftRunner(256), 8, kv)
            ref = base.generate(prompt, 24, record_logits=True, ignore_eos=True)
            calls.clear()
            out = spec.generate(prompt, 24, ignore_eos=True)
            assert compare(0, ref.token_ids, out.token_ids, ref.logits).diverge_at is None, kv
            stats = out.stats
            empty = stats.verify_calls - (stats.proposed_pos[0] if stats.proposed_pos else 0)
            verifies = [c for c in calls if c.startswith("target_verify")]
            # The empty proposals, and the budget's last token (a plain decode step).
            decodes = empty + stats.shape_steps.get("none", 0)
            assert empty > 0 and calls.count(TARGET_DECODE) == decodes, (kv, calls[:8])
            assert len(verifies) == stats.verify_calls - empty
    finally:
        del target.run


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
def test_auto_probes_its_costs_once_before_the_first_step(artifacts, monkeypatch, kv: str) -> None:  # type: ignore[no-untyped-def]
    """``--tree auto`` times every call before the runner's first step, at the slot the
    next step commits, and then follows the steps' own timings (a later request does not
    pay the probe again); the output stays target-only's."""
    from helpers import target_program

    from etspec.runtime.spec import TreeSettings
    from etspec.runtime.speculative import generator as gen_module
    from etspec.runtime.speculative.settings import tree_policy

    case = artifacts.target("llama_gqa_rope3")
    target = target_program(case, "pte")
    positions: list[int] = []
    measure = gen_module.measure_costs

    def recorded(program, draft, probe, position):  # type: ignore[no-untyped-def]
        positions.append(position)
        return measure(program, draft, probe, position)

    monkeypatch.setattr(gen_module, "measure_costs", recorded)
    drafter = PromptLookupDraftRunner(256)
    policy = tree_policy(TreeSettings("auto"), target.metadata, drafter)
    base, spec = runners(target, drafter, policy, kv)
    prompt = list(range(40, 48))
    budget = 80
    for _ in range(2):
        ref = base.generate(prompt, budget, record_logits=True, ignore_eos=True)
        out = spec.generate(prompt, budget, ignore_eos=True)
        assert compare(0, ref.token_ids, out.token_ids, ref.logits).diverge_at is None
    assert positions == [len(prompt)]
