"""The tree-budget dispatcher (``--tree auto``): cost model, probing, choice; and the
``--tree`` settings. Timing-free: costs and step times are given, not measured."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from etspec.contract import AUTO_REMEASURE_AFTER
from etspec.errors import EtspecError
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.dispatcher import AutoTree, DepthAcceptance
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.settings import auto_candidates, parse_shape, tree_policy
from etspec.runtime.speculative.shapes import ChainShape, NoDraftShape, TreeShape, chain_cost
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.step import StepCosts, StepOutcome, fixed_costs

WIDTHS = (4, 8, 16)
COSTS = StepCosts({4: 1.0, 8: 1.5, 16: 3.0}, draft_step_s=0.2, draft_extend_s=0.3, step_width=4)


def test_cost_model_uses_the_narrowest_width_and_draft_calls() -> None:
    assert COSTS.predict(ChainShape(3).cost, WIDTHS) == pytest.approx(1.0 + 2 * 0.2 + 0.3)
    assert COSTS.predict(ChainShape(5).cost, WIDTHS) == pytest.approx(1.5 + 4 * 0.2 + 0.3)
    # 3 levels of up to 4 nodes: 3 calls at step width 4.
    dyn = DynamicTree(depth=3, topk=4, total_tokens=16)
    assert COSTS.predict(dyn.cost, WIDTHS) == pytest.approx(3.0 + 3 * 0.2 + 0.3)


def _run(policy: AutoTree, accept: dict[str, Callable[[], int]], steps: int) -> dict[str, int]:
    """Feed ``policy`` steps whose time is the cost model's and whose accepted count is
    drawn from ``accept[name]``."""
    used: dict[str, int] = {}
    for _ in range(steps):
        shape = policy.choose()
        used[shape.name] = used.get(shape.name, 0) + 1
        assert policy.costs is not None
        seconds = policy.costs.predict(shape.cost, policy.widths)
        policy.observe(shape, StepOutcome(shape.cost.max_height, accept[shape.name](), seconds))
    return used


def _chain_sampler(rng: random.Random, rates: list[float], length: int) -> Callable[[], int]:
    """Accepted tokens of a chain whose depth d is accepted with ``rates[d-1]`` given the
    shallower ones were."""

    def draw() -> int:
        n = 0
        while n < length and rng.random() < rates[n]:
            n += 1
        return n

    return draw


def _expected(rates: list[float], length: int) -> float:
    total, p = 1.0, 1.0
    for d in range(length):
        p *= rates[d]
        total += p
    return total


def test_depth_acceptance_counts_reached_and_accepted_depths() -> None:
    acc = DepthAcceptance()
    acc.observe(height=3, accepted=1)  # depth 1 accepted, depth 2 rejected, 3 never reached
    acc.observe(height=2, accepted=2)  # both accepted; depth 3 not drafted
    assert acc.reached == [2, 2] and acc.accepted == [2, 1]
    # Laplace: depth 1 (2+1)/(2+2), depth 2 (1+1)/(2+2); depth 3 borrows depth 2.
    assert acc.conditional(1) == pytest.approx(0.75)
    assert acc.conditional(3) == pytest.approx(0.5)
    assert acc.expected_tokens(3) == pytest.approx(1 + 0.75 + 0.375 + 0.1875)
    assert DepthAcceptance().expected_tokens(2) == pytest.approx(1 + 0.5 + 0.25)


def test_a_proposal_that_runs_out_ends_the_chain_like_a_rejection() -> None:
    """Prompt lookup offering fewer tokens than the chain allows (its match ran out): a
    chain7 whose steps draft 2 or 6 tokens and accept them all emits 3 or 7, a mean of 5,
    not what depths 3-6 measured on the long matches alone would promise."""
    rng = random.Random(1)
    pooled, plain = DepthAcceptance(), DepthAcceptance()
    emitted = []
    for _ in range(2000):
        offered = rng.choice((2, 6))
        pooled.observe(offered, offered, allowed=7)
        plain.observe(offered, offered)
        emitted.append(offered + 1)
    assert pooled.expected_tokens(7) == pytest.approx(sum(emitted) / len(emitted), abs=0.1)
    assert plain.expected_tokens(7) > 6.5  # what the estimate was before
    lone = DepthAcceptance()
    lone.observe(0, 0, allowed=7)  # nothing offered: depth 1 reached, not accepted
    assert lone.reached == [1] and lone.accepted == [0]


def test_depth_acceptance_pools_chains_of_any_length() -> None:
    # Steps of chain2 and chain6 together estimate chain4 (never run) within 0.05 tokens.
    rng = random.Random(0)
    rates = [0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    acc = DepthAcceptance()
    for i in range(4000):
        length = 2 if i % 2 else 6
        acc.observe(length, _chain_sampler(rng, rates, length)())
    for n in (2, 4, 6):
        assert acc.expected_tokens(n) == pytest.approx(_expected(rates, n), abs=0.05)


def test_auto_stays_within_5_percent_of_the_fastest_chain() -> None:
    rng = random.Random(1)
    rates = [0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3]
    shapes = [ChainShape(n) for n in range(2, 8)]
    policy = AutoTree(shapes, WIDTHS, costs=COSTS)
    true_rate = {s.name: _expected(rates, s.length) / COSTS.predict(s.cost, WIDTHS) for s in shapes}
    best = max(true_rate.values())
    used = _run(policy, {s.name: _chain_sampler(rng, rates, s.length) for s in shapes}, 3000)
    total = sum(r.tokens for r in policy.records.values())
    seconds = sum(r.seconds for r in policy.records.values())
    assert total / seconds >= 0.95 * best
    # Shapes clearly worse (chain4..7 here) are run in 2% of the steps at most: the longest
    # one now and then, as the depths only it reaches keep an optimistic bound until
    # measured (what keeps a shorter chain from locking itself in).
    clearly_worse = [n for n, r in true_rate.items() if r < 0.85 * best]
    assert clearly_worse and sum(used.get(n, 0) for n in clearly_worse) <= 0.02 * 3000


def test_a_step_that_drafts_nothing_costs_a_decode() -> None:
    costs = StepCosts({4: 1.0, 8: 1.5}, 0.2, 0.3, 4, decode_s=0.6)
    assert costs.predict(NoDraftShape().cost, (4, 8)) == pytest.approx(0.6 + 0.3)
    # Untimed, a decode is priced at the narrowest verify.
    assert StepCosts({4: 1.0, 8: 1.5}).predict(NoDraftShape().cost, (4, 8)) == pytest.approx(1.0)
    assert parse_shape("none").cost == NoDraftShape().cost


@pytest.mark.parametrize(
    ("rates", "speculates"),
    [([0.1, 0.05, 0.02], False), ([0.8, 0.7, 0.6], True)],
)
def test_auto_stops_speculating_where_it_does_not_pay(rates: list[float], speculates: bool) -> None:
    """A draft that rarely agrees (a sampled base model that does not repeat itself, with
    prompt lookup): a step that drafts nothing, one decode at 0.6 s, beats every chain, and
    auto settles on it within a few dozen steps; a draft that agrees keeps auto speculating."""
    rng = random.Random(5)
    costs = StepCosts({4: 1.0, 8: 1.5}, 0.0, 0.0, 4, decode_s=0.6)
    shapes: list[TreeShape] = [NoDraftShape(), *(ChainShape(n) for n in (2, 3))]
    policy = AutoTree(shapes, (4, 8), costs=costs)
    draws = {s.name: _chain_sampler(rng, rates, s.cost.max_height) for s in shapes}
    _run(policy, draws, 100)
    used = _run(policy, draws, 400)
    drafted_nothing = used.get("none", 0)
    assert (drafted_nothing < 40) if speculates else (drafted_nothing > 360), used


def _lookup_run(policy: AutoTree, rates: dict[str, float], steps: int, rng: random.Random):
    """Steps of prompt lookup under ``policy``: each offers 7 tokens found by a 1-, 2- or
    3-gram (equally often) whose every depth is accepted with ``rates[evidence]``, cut by
    ``policy.trim``; each takes the cost model's time of what it verified. Returns the
    tokens emitted, the seconds and the kept lengths per evidence."""
    tokens, seconds = 0, 0.0
    kept: dict[str, list[int]] = {e: [] for e in rates}
    for _ in range(steps):
        shape = policy.choose()
        evidence = rng.choice(sorted(rates))
        offered = shape.cost.max_height
        keep = policy.trim(shape, offered, evidence) if offered else 0
        accepted = _chain_sampler(rng, [rates[evidence]] * 7, keep)()
        assert policy.costs is not None
        took = policy.costs.predict(chain_cost(keep), policy.widths)
        policy.observe(shape, StepOutcome(keep, accepted, took, keep, evidence=evidence))
        kept[evidence].append(keep)
        tokens, seconds = tokens + accepted + 1, seconds + took
    return tokens, seconds, kept


def test_auto_cuts_each_lookup_proposal_by_its_evidence() -> None:
    """Sampled prompt lookup on a base model (Gemma 3 270M's chat prompts: 1-gram matches
    accept ~0.2 per depth, 3-gram ones ~0.9): a verify of 4 rows costs 1.4 decodes, of 8
    rows 2.1. Auto decodes instead of verifying 1-gram matches, keeps 3-gram matches whole,
    and emits more tokens/s than either drafting every match or none."""
    costs = StepCosts({4: 1.4, 8: 2.1}, 0.0, 0.0, 1, decode_s=1.0)
    rates = {"ngram1": 0.2, "ngram2": 0.5, "ngram3": 0.9}
    shapes: list[TreeShape] = [NoDraftShape(), *(ChainShape(n) for n in range(2, 8))]
    policy = AutoTree(shapes, (4, 8), costs=costs)
    rng = random.Random(3)
    _lookup_run(policy, rates, 300, rng)
    tokens, seconds, kept = _lookup_run(policy, rates, 1000, rng)
    ones, threes = kept["ngram1"], kept["ngram3"]
    assert sum(k == 0 for k in ones) >= 0.9 * len(ones), ones
    assert sum(k == 7 for k in threes) >= 0.9 * len(threes), threes
    # Drafting every match whole (no cut) on the same mix, by the model's expectation:
    whole = sum(_expected([r] * 7, 7) for r in rates.values()) / (3 * 2.1)
    assert tokens / seconds > 1.05 * max(whole, 1.0)


def test_a_cut_keeps_an_unseen_evidence_and_a_fixed_shape_keeps_everything() -> None:
    policy = AutoTree([ChainShape(3)], WIDTHS, costs=COSTS)
    assert policy.trim(ChainShape(3), 3, "ngram1") == 3  # no steps seen: optimistic
    assert ChainShape(3).trim(ChainShape(3), 3, "ngram1") == 3
    assert AutoTree([ChainShape(3)], WIDTHS).trim(ChainShape(3), 3, "ngram1") == 3  # no costs


@pytest.mark.parametrize(("tree_accepts", "winner"), [(1, "chain3"), (2, "tree")])
def test_auto_tries_both_and_picks_between_chain_and_tree(tree_accepts: int, winner: str) -> None:
    rng = random.Random(2)
    rates = [0.4, 0.3, 0.2]  # chain3: 1.544 tokens / 1.7 s = 0.91/s
    costs = StepCosts({4: 1.0, 8: 1.5, 16: 1.5}, 0.2, 0.3, 4)
    tree = DynamicTree(3, 4, 16)  # 1.5 + 3 * 0.2 + 0.3 = 2.4 s: 2 tokens 0.83/s, 3 1.25/s
    policy = AutoTree([ChainShape(3), tree], WIDTHS, costs=costs)
    draws = {"chain3": _chain_sampler(rng, rates, 3), tree.name: lambda: tree_accepts}
    first = _run(policy, draws, 10)
    assert len(first) == 2  # both tried early, while their bounds are wide
    used = _run(policy, draws, 400)
    assert used.get(tree.name if winner == "tree" else "chain3", 0) > 340
    report = policy.report()
    assert report[tree.name]["estimated_tokens_per_s"] == pytest.approx((tree_accepts + 1) / 2.4)
    assert report["chain3"]["estimated_tokens_per_s"] == pytest.approx(
        policy.chains.expected_tokens(3) / 1.7
    )


def test_auto_predicts_unrun_chains_from_costs_plus_measured_overhead() -> None:
    tree = StaticTree.pruned(3)
    policy = AutoTree([ChainShape(3), ChainShape(5), tree], WIDTHS, costs=COSTS)
    policy.choose()
    for _ in range(3):  # chain3 steps take 0.5 s more than the per-method costs predict
        policy.observe(ChainShape(3), StepOutcome(3, 1, 1.7 + 0.5))
    policy.observe(tree, StepOutcome(1, 1, 9.0))  # a tree's commit is not a chain's cost
    # Measured steps count against the prediction (plus overhead) weighted as 4 steps.
    assert policy.step_seconds(ChainShape(3)) == pytest.approx(2.2)
    assert policy.step_seconds(ChainShape(5)) == pytest.approx(2.6 + 0.5)
    # chain5 has never run, yet has an estimate from chain3's depth acceptance.
    assert policy.estimate(ChainShape(5)) == pytest.approx(
        policy.chains.expected_tokens(5) / (2.6 + 0.5)
    )


def test_auto_skips_candidates_that_cannot_win() -> None:
    # A candidate whose every-token-accepted bound is below an estimated rate is never run.
    slow = StaticTree.full(1, 15)  # one level, 15 nodes: height 1, at best 2 tokens / 3.3 s
    policy = AutoTree([ChainShape(3), slow], WIDTHS, costs=COSTS)
    used = _run(policy, {"chain3": lambda: 3, slow.name: lambda: 1}, 50)
    assert slow.name not in used


def test_auto_candidates_follow_the_artifact() -> None:
    from etspec.contract import TargetMetadata

    meta = TargetMetadata(
        format_version=1, model_family="llama", vocab_size=10, hidden_size=4, num_layers=4,
        layer_types="full", sliding_window=0,
        max_context=64, cache_size=80, prefill_chunk=8, verify_width=16, verify_widths=(4, 16),
        hidden_state_point="layer_input", hidden_state_layers=(1,), bos_token_id=1,
        eos_token_ids=(2,), kv_strategies="position-overwrite", kv_cache_bytes=0, dtype="fp32",
        backend="xnnpack", tokenizer_sha256="", assistant="", assistant_step_width=0,
    )  # fmt: skip
    names = [s.name for s in auto_candidates(meta, branching=True)]
    chains = ["none", *(f"chain{n}" for n in range(2, 8))]
    assert names == [*chains, "N3", "N15", "dynamic-d3k4t16"]
    assert all(s.cost.max_nodes + 1 <= 16 for s in auto_candidates(meta, True))
    assert [s.name for s in auto_candidates(meta, branching=False)] == chains
    # A recipe that quantizes activations per row gets chains only: a tree's column order
    # can flip a greedy token there (contract.ROW_QUANTIZED_DTYPES).
    quantized = replace(meta, dtype="8da8w-e4")
    assert [s.name for s in auto_candidates(quantized, branching=True)] == chains
    # Every candidate can be run as a fixed shape by its reported name (bench --trees).
    for shape in auto_candidates(meta, True):
        again = parse_shape(shape.name)
        assert again.name == shape.name and again.cost == shape.cost
    dynamic = tree_policy(TreeSettings("dynamic"), meta, True)
    assert dynamic.name == "dynamic-d3k4t16"  # type: ignore[attr-defined]
    static = tree_policy(TreeSettings("static", static_tree="D2xBF2"), meta, True)
    assert static.name == "D2xBF2"  # type: ignore[attr-defined]
    with pytest.raises(EtspecError, match="unknown --tree 'bush'"):
        TreeSettings("bush")
    with pytest.raises(EtspecError, match="--num-spec-tokens"):
        TreeSettings("chain", num_spec_tokens=0)


def test_chain_bound_weighs_each_depth_by_the_steps_that_reach_it() -> None:
    acc = DepthAcceptance()
    for _ in range(200):
        acc.observe(height=3, accepted=1)  # depth 1 always accepted, depth 2 never
    # Depths 3..7 are unseen, but a step reaches them 1 time in 200: they add little doubt.
    assert acc.expected_tokens(7, z=2.0) - acc.expected_tokens(7) < 0.1
    few = DepthAcceptance()
    few.observe(height=7, accepted=0)  # one early rejection at depth 1
    # One look decides little: the bound stays well above the mean (1.5 tokens).
    assert few.expected_tokens(7, z=3.0) > few.expected_tokens(7) + 1.0
    # Depth 1 seen 2,000 times at 0.4, depths 2..7 each seen a handful of times at 0.5:
    # the delta method (a depth's error times the tokens its acceptance multiplies) against
    # the per-depth bounds it replaced, which put each rare depth near 1.
    weak = DepthAcceptance(reached=[2000, 800, 400, 200, 100, 50, 25],
                           accepted=[800, 400, 200, 100, 50, 25, 12])  # fmt: skip
    mean = weak.expected_tokens(7)
    assert mean == pytest.approx(1 + sum(0.4 * 0.5**d for d in range(7)), abs=0.01)
    assert weak.expected_tokens(7, z=4.0) - mean < 0.15


WEAK_COSTS = StepCosts({4: 12.6, 8: 15.2, 16: 20.0}, 0.8, 0.8, 4, decode_s=11.5)


@pytest.mark.parametrize("per_request", [None, 70])
@pytest.mark.parametrize("rates", [[0.42, 0.5, 0.48, 0.45], [0.34, 0.35, 0.33, 0.3]])
def test_auto_keeps_short_chains_for_a_weak_draft(
    rates: list[float], per_request: int | None
) -> None:
    """Gemma 3 270M's draft and costs (ms; Python runtime, default export): a third to
    0.4 of draft tokens accepted, chain2 or chain3 fastest. ``per_request``: a fresh policy
    every 70 steps at the seeded fixed costs, as each seeded sampling request learns afresh.
    The per-depth bounds ran chain7 on 90% of seeded steps here, 27-30% below the best."""
    rng = random.Random(3)
    rates = rates + [rates[-1]] * 3
    shapes: list[TreeShape] = [NoDraftShape(), *(ChainShape(n) for n in range(2, 8))]
    costs = WEAK_COSTS if per_request is None else fixed_costs(WIDTHS)

    def length(s: TreeShape) -> int:
        return s.length if isinstance(s, ChainShape) else 0

    best = max(_expected(rates, length(s)) / costs.predict(s.cost, WIDTHS) for s in shapes)
    tokens = seconds = 0.0
    for _ in range(3000 // (per_request or 3000)):
        policy = AutoTree(shapes, WIDTHS, costs=costs)
        draws = {s.name: _chain_sampler(rng, rates, length(s)) for s in shapes}
        _run(policy, draws, per_request or 3000)
        tokens += sum(r.tokens for r in policy.records.values())
        seconds += sum(r.seconds for r in policy.records.values())
    assert tokens / seconds >= 0.95 * best


def test_auto_measures_costs_again_once_after_warm_up() -> None:
    policy = AutoTree([ChainShape(3)], WIDTHS)
    assert policy.needs_costs()
    policy.use_costs(COSTS)
    for _ in range(AUTO_REMEASURE_AFTER):
        assert not policy.needs_costs()
        policy.observe(ChainShape(3), StepOutcome(3, 1, 9.0))  # 7.3 s of overhead
    assert policy.needs_costs()
    policy.use_costs(COSTS)
    # The overhead was measured against the first table: it starts again from nothing.
    assert policy.step_seconds(ChainShape(3)) == pytest.approx(
        (AUTO_REMEASURE_AFTER * 9.0 + 4 * 1.7) / (AUTO_REMEASURE_AFTER + 4)
    )
    for _ in range(10 * AUTO_REMEASURE_AFTER):
        policy.observe(ChainShape(3), StepOutcome(3, 1, 1.7))
        assert not policy.needs_costs()


# Recorded on the bundled pair: the tokens each chain7 and N7 step accepted over 164
# HumanEval prompts, and the per-call costs of the same run (its "about" says how).
TRACE = json.loads((Path(__file__).parents[2] / "data" / "dispatch_trace_bundled.json").read_text())
TRACE_COSTS = StepCosts(
    {int(w): s for w, s in TRACE["costs"]["verify_s"].items()},
    TRACE["costs"]["draft_step_s"],
    TRACE["costs"]["draft_extend_s"],
    TRACE["costs"]["step_width"],
)
CHAIN7 = [int(a) for prompt in TRACE["accepted"]["chain7"] for a in prompt]
N7 = [int(a) for prompt in TRACE["accepted"]["N7"] for a in prompt]


def _replay_trace(
    policy: AutoTree | TreeShape, chain7: list[int], seed: int, tokens: int = 12000
) -> tuple[float, dict[str, int]]:
    """Tokens/s of ``policy`` over the recorded acceptance (a chain of length L accepts
    ``min(a, L)`` of chain7's ``a``; trees read N7's steps), each step timed by the recorded
    costs plus host work, with +-10..30% noise and a 5x hiccup in 1% of steps."""
    rng = random.Random(seed)
    if isinstance(policy, AutoTree):
        policy.use_costs(TRACE_COSTS)
    chains = trees = emitted = 0
    seconds, used = 0.0, {}
    while emitted < tokens:
        shape = policy.choose()
        used[shape.name] = used.get(shape.name, 0) + 1
        if isinstance(shape, ChainShape):
            accepted = min(chain7[chains % len(chain7)], shape.length)
            chains += 1
        else:
            accepted = N7[trees % len(N7)]
            trees += 1
        host = TRACE["host_s"]["chain" if isinstance(shape, ChainShape) else "tree"]
        step = (TRACE_COSTS.predict(shape.cost, WIDTHS) + host) * (1 + rng.uniform(-0.1, 0.3))
        step *= 5 if rng.random() < 0.01 else 1
        emitted += accepted + 1
        seconds += step
        policy.observe(shape, StepOutcome(shape.cost.max_height, accepted, step))
    return emitted / seconds, used


def _regret(shapes: Callable[[], list[TreeShape]], chain7: list[int], seed: int) -> float:
    best = max(_replay_trace(s, chain7, seed)[0] for s in shapes())
    return 1 - _replay_trace(AutoTree(shapes(), WIDTHS), chain7, seed)[0] / best


@pytest.mark.parametrize("offset", [0, 1000, 2000, 3000])
def test_auto_regret_on_the_recorded_trace_is_under_5_percent(offset: int) -> None:
    def shapes() -> list[TreeShape]:
        return [*(ChainShape(n) for n in range(2, 8)), StaticTree.pruned(7)]

    chain7 = CHAIN7[offset:] + CHAIN7[:offset]
    assert _regret(shapes, chain7, seed=offset) < 0.05


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_recovers_from_an_unlucky_start(seed: int) -> None:
    # 60 poorly accepted steps first (the dispatcher's first look at depths 3..7 is bad),
    # then the recorded text. The dispatcher that bounded chains by one pooled standard
    # error settled on chain3 here (10% regret at seed 2) and never looked deeper again.
    rng = random.Random(5)
    chain7 = [min(int(rng.expovariate(1.5)), 7) for _ in range(60)] + CHAIN7

    def shapes() -> list[TreeShape]:
        return [ChainShape(n) for n in range(2, 8)]

    assert _regret(shapes, chain7, seed) < 0.03
