"""Tree speculation end to end on the 16-token pair compiled for trees (verify widths 16
and 72, draft step width 4).

- Greedy equivalence for static and dynamic trees of 4 to 64 nodes, both KV strategies,
  ``.pte`` and eager, with the EAGLE-3 draft and with a scripted tree draft that forces the
  three hard cases: the accepted path is not the first branch, only the root's token is
  emitted, and the accepted path ends at the deepest level (each is counted and required).
- Committed KV after every tree step equals sequential decoding of the committed tokens
  (eager, tensors compared directly, tolerance 1e-5: verify vs decode summation order).
- The narrowest compiled verify width that holds a tree is the one that runs.
"""

from __future__ import annotations

import pytest
from helpers import (
    ScriptedTreeDraftRunner,
    Truth,
    check_greedy_equivalence,
    committed_kv_check,
    oracle,
    pair_programs,
    random_prompts,
    runners,
    tree_children,
)

from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.verifier import Verdict, Verifier

V = 16
SHAPES = {
    "static4": StaticTree.parse("[[0], [1], [0, 0], [1, 0]]"),
    "N12": StaticTree.parse("N12"),
    "D5xBF2": StaticTree.full(5, 2),  # 62 nodes
    "N64": StaticTree.pruned(64),
    "dynamic4": DynamicTree(depth=2, topk=2, total_tokens=5),
    "dynamic16": DynamicTree(depth=3, topk=4, total_tokens=16),
    "dynamic64": DynamicTree(depth=5, topk=4, total_tokens=65),
}
KV = ["position-overwrite", "scratch-commit"]
PROMPTS = random_prompts(8, vocab=V, longest=20, seed=5)
BUDGETS = [12 + (7 * i) % 25 for i in range(8)]
# Rank of the target's token in the scripted draft, per step: first branch, a later
# sibling, nowhere (root's token only), first branch again, third sibling.
SCHEDULE = [0, 1, 99, 0, 2]


@pytest.fixture(scope="module", params=["pte", "eager"])
def tree_pair(request, artifacts):  # type: ignore[no-untyped-def]
    return request.param, pair_programs(artifacts.tree_draft(), request.param, step_width=4)


class RecordingVerifier(Verifier):
    """Counts the step kinds the suite must cover."""

    def __init__(self) -> None:
        self.not_first_branch = self.root_only = self.deepest = self.steps = 0

    def verify(self, tree, logits, sampler, draft_probs, history=()) -> Verdict:  # type: ignore[no-untyped-def]
        verdict = super().verify(tree, logits, sampler, draft_probs, history)
        self.steps += 1
        nodes = verdict.nodes
        if any(tree_children(tree, int(tree.parents[n]))[0] != n for n in nodes[1:]):
            self.not_first_branch += 1
        self.root_only += verdict.accepted == 0 and tree.size > 0
        self.deepest += tree.size > 0 and verdict.accepted == tree.max_depth
        return verdict


@pytest.mark.parametrize("draft_kind", ["eagle3", "scripted"])
@pytest.mark.parametrize("kv", KV)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_tree_greedy_equals_target_only(tree_pair, shape: str, kv: str, draft_kind: str) -> None:  # type: ignore[no-untyped-def]
    mode, (target, draft) = tree_pair
    truth = Truth()
    if draft_kind == "eagle3":
        runner = Eagle3DraftRunner(draft)
    else:
        runner = ScriptedTreeDraftRunner(truth, V, lambda s: SCHEDULE[s % len(SCHEDULE)])
    recorder = RecordingVerifier()
    base, spec = runners(target, runner, SHAPES[shape], kv, recorder)
    label = f"{mode} {draft_kind} {shape} {kv}"
    check_greedy_equivalence(label, base, spec, PROMPTS, BUDGETS, truth)
    if draft_kind == "scripted":
        assert recorder.not_first_branch > 0, "no step accepted a path off the first branch"
        assert recorder.root_only > 0, "no step emitted only the root's token"
        assert recorder.deepest > 0, "no step accepted a path to the deepest level"


def test_the_narrowest_verify_width_runs(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.tree_draft(), "pte")
    used: list[str] = []
    real = target.run

    def run(method, *inputs):  # type: ignore[no-untyped-def]
        used.append(method)
        return real(method, *inputs)

    target.run = run  # type: ignore[method-assign]
    for shape, method in [
        (SHAPES["dynamic16"], "target_verify_16"),
        (SHAPES["N64"], "target_verify"),
    ]:
        used.clear()
        _, spec = runners(target, Eagle3DraftRunner(draft), shape)
        spec.generate([1, 2, 3], 30, ignore_eos=True)
        verifies = [m for m in used if m.startswith("target_verify")]
        # Near the budget a tree is cut to the remaining height and may fit a narrower one.
        assert verifies[0] == method and set(verifies) <= {"target_verify_16", method}


KV_ATOL = 1e-5


@pytest.mark.parametrize("kv", KV)
@pytest.mark.parametrize("shape", ["N12", "dynamic16", "D5xBF2"])
def test_committed_kv_after_every_tree_step(artifacts, shape: str, kv: str) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.tree_draft()
    target, _ = pair_programs(case, "eager")
    sequential, _ = pair_programs(case, "eager")
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    base, _ = runners(target)
    ref = base.generate(prompt, 40, ignore_eos=True)
    full = [*prompt, *ref.token_ids]
    checked: list[int] = []
    check = committed_kv_check(target, sequential, full, checked, KV_ATOL)

    schedule = lambda s: SCHEDULE[s % len(SCHEDULE)]  # noqa: E731
    draft = ScriptedTreeDraftRunner(oracle(prompt, ref.token_ids), V, schedule, check)
    recorder = RecordingVerifier()
    _, spec = runners(target, draft, SHAPES[shape], kv, recorder)
    out = spec.generate(prompt, 40, ignore_eos=True)
    assert out.token_ids == ref.token_ids
    steps = out.stats.verify_calls + out.stats.shape_steps.get("none", 0)
    assert len(checked) == steps - 1
    assert recorder.not_first_branch > 0 and recorder.deepest > 0
    # Off-first-branch paths are not contiguous: they were moved by target_commit.
    assert out.stats.commit_calls > 0
