"""The tree-budget dispatcher (``--tree auto``): cost model, probing, choice; and the
``--tree`` settings. Timing-free: costs and step times are given, not measured."""

from __future__ import annotations

import pytest

from etspec.errors import EtspecError
from etspec.runtime.speculative.dispatcher import (
    AutoTree,
    StepCosts,
    TreeSettings,
    auto_candidates,
    shape_by_name,
)
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.shapes import ChainShape
from etspec.runtime.speculative.static_tree import StaticTree

WIDTHS = (4, 8, 16)
COSTS = StepCosts({4: 1.0, 8: 1.5, 16: 3.0}, draft_step_s=0.2, draft_extend_s=0.3, step_width=4)


def test_cost_model_uses_the_narrowest_width_and_draft_calls() -> None:
    assert COSTS.predict(ChainShape(3), WIDTHS) == pytest.approx(1.0 + 2 * 0.2 + 0.3)
    assert COSTS.predict(ChainShape(5), WIDTHS) == pytest.approx(1.5 + 4 * 0.2 + 0.3)
    # 3 levels of up to 4 nodes: 3 calls at step width 4.
    dyn = DynamicTree(depth=3, topk=4, total_tokens=16)
    assert COSTS.predict(dyn, WIDTHS) == pytest.approx(3.0 + 3 * 0.2 + 0.3)


def _run(policy: AutoTree, tokens_per_step: dict[str, float], steps: int) -> dict[str, int]:
    """Feed ``policy`` steps whose time is the cost model's and tokens as given."""
    used: dict[str, int] = {}
    for _ in range(steps):
        shape = policy.choose()
        used[shape.name] = used.get(shape.name, 0) + 1
        assert policy.costs is not None
        policy.observe(
            shape, round(tokens_per_step[shape.name]), policy.costs.predict(shape, WIDTHS)
        )
    return used


def test_auto_probes_then_keeps_the_fastest() -> None:
    shapes = [ChainShape(3), ChainShape(7), DynamicTree(3, 4, 16)]
    policy = AutoTree(shapes, WIDTHS, calibrate=lambda: COSTS, probe_steps=4)
    # chain3: 3 tokens / 1.7 s; chain7: 4 / 3.0 (could reach 8 / 3.0, so it is probed);
    # dynamic: at best 5 / 3.9 s, below chain3's measured rate, so it never runs.
    used = _run(policy, {"chain3": 3, "chain7": 4, "dynamic-d3k4t16": 5}, 200)
    assert used["chain3"] > 190 and used["chain7"] == 4
    assert "dynamic-d3k4t16" not in used
    report = policy.report()
    assert report["chain3"]["tokens_per_s"] == pytest.approx(3 / 1.7)


def test_auto_skips_candidates_that_cannot_win() -> None:
    # A candidate whose every-token-accepted bound is below a measured rate is never run.
    slow = StaticTree.full(1, 15)  # one level, 15 nodes: height 1, at best 2 tokens / 3.3 s
    policy = AutoTree([ChainShape(3), slow], WIDTHS, calibrate=lambda: COSTS, probe_steps=4)
    used = _run(policy, {"chain3": 3, slow.name: 2}, 50)
    assert slow.name not in used


def test_auto_candidates_follow_the_artifact() -> None:
    from etspec.contract import TargetMetadata

    meta = TargetMetadata(
        format_version=1, model_family="llama", vocab_size=10, hidden_size=4, num_layers=4,
        max_context=64, cache_size=80, prefill_chunk=8, verify_width=16, verify_widths=(4, 16),
        hidden_state_point="layer_input", hidden_state_layers=(1,), bos_token_id=1,
        eos_token_ids=(2,), kv_strategies="position-overwrite", kv_cache_bytes=0, dtype="fp32",
        backend="xnnpack", tokenizer_sha256="",
    )  # fmt: skip
    names = [s.name for s in auto_candidates(meta, branching=True)]
    assert names == ["chain3", "N3", "chain7", "N15", "dynamic-d3k4t16"]
    assert all(s.cost.max_nodes + 1 <= 16 for s in auto_candidates(meta, True))
    assert [s.name for s in auto_candidates(meta, branching=False)] == ["chain3", "chain7"]
    # Every candidate can be run as a fixed shape by its reported name (bench --trees).
    for shape in auto_candidates(meta, True):
        again = shape_by_name(shape.name)
        assert again.name == shape.name and again.cost == shape.cost
    assert TreeSettings("dynamic").policy(meta, True).name == "dynamic-d3k4t16"  # type: ignore[attr-defined]
    assert TreeSettings("static", static_tree="D2xBF2").policy(meta, True).name == "D2xBF2"  # type: ignore[attr-defined]
    with pytest.raises(EtspecError, match="unknown --tree 'bush'"):
        TreeSettings("bush").policy(meta, True)
    with pytest.raises(EtspecError, match="--num-spec-tokens"):
        TreeSettings("chain", num_spec_tokens=0).policy(meta, True)
