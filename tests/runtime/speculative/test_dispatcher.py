"""The dispatcher (``--tree auto``): cost model, acceptance estimates, the choice among a
decode, the drafter's offers and the model's shapes; and the ``--tree`` settings.
Timing-free: costs and step times are given, not measured."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from copy import deepcopy
from dataclasses import replace
from pathlib import Path

import pytest

from etspec.contract import (
    AUTO_COST_MIN_CALLS,
    AUTO_PROBE_SHARE,
    AUTO_STALE_STEPS,
    TargetMetadata,
)
from etspec.errors import EtspecError
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.costs import CostModel, ordered
from etspec.runtime.speculative.dispatcher import DepthAcceptance, Dispatcher, StepRecord
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.settings import auto_candidates, parse_shape, tree_policy
from etspec.runtime.speculative.shapes import ChainShape, Choice, NoDraftShape, TreeShape
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.step import Offer, StepCosts, StepOutcome
from etspec.runtime.speculative.tree import DraftTree

WIDTHS = (4, 8, 16)
COSTS = StepCosts({4: 1.0, 8: 1.5, 16: 3.0}, draft_s=0.2, step_width=4, decode_s=0.8)


def test_cost_model_uses_the_narrowest_width_and_draft_calls() -> None:
    # A model chain: the extend that catches the draft up, then one call per level.
    assert COSTS.predict(ChainShape(3).cost, WIDTHS) == pytest.approx(1.0 + 3 * 0.2)
    assert COSTS.predict(ChainShape(5).cost, WIDTHS) == pytest.approx(1.5 + 5 * 0.2)
    # A lookup's chain calls no model.
    assert COSTS.predict(ChainShape(5).cost, WIDTHS, model=False) == pytest.approx(1.5)
    # 3 levels of up to 4 nodes: 3 calls at step width 4, and the extend.
    dyn = DynamicTree(depth=3, topk=4, total_tokens=16)
    assert COSTS.predict(dyn.cost, WIDTHS) == pytest.approx(3.0 + 4 * 0.2)
    # A step that drafts nothing is one decode; host work per kind of step is added.
    with_host = replace(COSTS, overhead_s={"decode": 0.05, "chain": 0.1, "tree": 0.3})
    assert with_host.predict(NoDraftShape().cost, WIDTHS) == pytest.approx(0.85)
    assert with_host.predict(ChainShape(3).cost, WIDTHS) == pytest.approx(1.7)
    assert with_host.predict(dyn.cost, WIDTHS) == pytest.approx(4.1)


def _step(choice: Choice, accepted: int, costs: StepCosts, slow: float = 1.0, host: float = 0.0):  # type: ignore[no-untyped-def]
    """The outcome of running ``choice``: its calls take ``costs`` times ``slow``."""
    if choice.decodes:
        target_s = costs.decode_s * slow
        return StepOutcome(0, 0, target_s + host, target_s=target_s, rows=1)
    if choice.lookup:
        m = choice.lookup
        rows = next(w for w in WIDTHS if w >= m + 1)
        target_s = costs.verify_s[rows] * slow
        return StepOutcome(m, min(accepted, m), target_s + host, m, "e", target_s, rows)
    cost = choice.shape.cost
    rows = next(w for w in WIDTHS if w >= cost.max_nodes + 1)
    target_s = costs.verify_s[rows] * slow
    calls = 1 + max(cost.levels, -(-cost.fed_nodes // costs.step_width))
    draft_s = calls * costs.draft_s * slow
    height = cost.max_height
    return StepOutcome(
        height, min(accepted, height), target_s + draft_s + host, height, None, target_s,
        rows, draft_s, calls,
    )  # fmt: skip


def _run(
    policy: Dispatcher,
    costs: StepCosts,
    steps: int,
    accept: Callable[[Choice], int],
    offer: Callable[[], Offer | None] = lambda: None,
    slow: Callable[[], float] = lambda: 1.0,
) -> tuple[float, Counter[str]]:
    """Tokens/s of ``steps`` steps whose accepted count ``accept`` draws for the choice and
    whose calls take ``costs`` times ``slow()``; and how often each way ran."""
    used: Counter[str] = Counter()
    tokens, seconds = 0, 0.0
    for _ in range(steps):
        o = offer()
        choice = policy.choose(o, 1 << 20)
        step = _step(choice, accept(choice), costs, slow())
        if choice.lookup and o is not None:
            step = replace(step, evidence=o.evidence)
        policy.observe(choice, step)
        used["lookup" if choice.lookup else choice.shape.name] += 1
        tokens += step.emitted
        seconds += step.seconds
    return tokens / seconds, used


def _geometric(rng: random.Random, rates: list[float]) -> Callable[[int], int]:
    """Accepted tokens of a chain of a given length whose depth d is accepted with
    ``rates[d-1]`` (the last rate beyond) given the shallower ones were."""

    def draw(length: int) -> int:
        n = 0
        while n < length and rng.random() < rates[min(n, len(rates) - 1)]:
            n += 1
        return n

    return draw


def _expected(rates: list[float], length: int) -> float:
    total, p = 1.0, 1.0
    for d in range(length):
        p *= rates[min(d, len(rates) - 1)]
        total += p
    return total


def _dispatcher(shapes: list[TreeShape], costs: StepCosts = COSTS, **kw) -> Dispatcher:  # type: ignore[no-untyped-def]
    policy = Dispatcher(shapes, WIDTHS, **kw)
    policy.use_costs(costs)
    return policy


def _chains(longest: int = 7) -> list[TreeShape]:
    return [ChainShape(n) for n in range(1, longest + 1)]


def _height(choice: Choice) -> int:
    return choice.lookup or choice.shape.cost.max_height


def test_depth_acceptance_counts_reached_and_accepted_depths() -> None:
    acc = DepthAcceptance()
    acc.observe(height=3, accepted=1)  # depth 1 accepted, depth 2 rejected, 3 never reached
    acc.observe(height=2, accepted=2)  # both accepted; depth 3 not drafted
    assert acc.reached == [2, 2] and acc.accepted == [2, 1]
    # Each depth's prior is two steps at the shallower depth's estimate (one accept and one
    # reject at depth 1): depth 1 (2 + 1) / (2 + 2), depth 2 (1 + 1.5) / (2 + 2), each with
    # its count; depth 3, never reached, takes depth 2's rate with no count.
    assert [v for e in acc.estimates(3) for v in e] == pytest.approx([0.75, 2, 0.625, 2, 0.625, 0])
    assert acc.conditional(3) == pytest.approx((0.625, 0))
    assert acc.tokens(3) == pytest.approx(1 + 0.75 + 0.75 * 0.625 + 0.75 * 0.625**2)
    assert DepthAcceptance().tokens(2) == pytest.approx(1 + 0.5 + 0.25)
    # A context's own estimate is drawn toward the pooled one (two steps' worth).
    pooled = DepthAcceptance([10], [9])  # (9 + 1) / (10 + 2)
    own = DepthAcceptance([2], [0])
    assert own.conditional(1, pooled)[0] == pytest.approx((0 + 2 * 10 / 12) / 4)
    # Counts decay: what was seen long ago weighs less.
    acc.decay(0.5)
    assert acc.reached == [1, 1] and acc.accepted == [1, 0.5]


def test_chain_bound_weighs_each_depth_by_the_steps_that_reach_it() -> None:
    acc = DepthAcceptance()
    for _ in range(200):
        acc.observe(height=3, accepted=1)  # depth 1 always accepted, depth 2 never
    # Depths 3..7 are unseen, but a step reaches them 1 time in 200: they add little doubt.
    assert acc.tokens(7, z=2.0) - acc.tokens(7) < 0.1
    few = DepthAcceptance()
    few.observe(height=7, accepted=0)  # one early rejection at depth 1
    # One look decides little: the bound stays well above the mean.
    assert few.tokens(7, z=3.0) > few.tokens(7) + 1.0


def test_step_record_bound_and_decay() -> None:
    rec = StepRecord()
    assert rec.upper(1.0) is None
    for n in (2, 4, 2, 4):
        rec.add(n)
    assert rec.upper(0.0) == pytest.approx(3.0)
    assert rec.upper(1.0) > 3.0 and rec.runs == 4
    rec.decay(0.5)
    assert rec.steps == pytest.approx(2.0) and rec.upper(0.0) == pytest.approx(3.0)


def test_cost_model_scales_probes_by_what_steps_take_and_forgets_stale_calls() -> None:
    model = CostModel(WIDTHS)
    assert not model.ready
    model.add_probe(StepCosts({4: 1.2, 8: 1.8, 16: 3.6}, draft_s=0.3, step_width=4, decode_s=1.0))
    assert model.ready and model.costs().verify_s == {4: 1.2, 8: 1.8, 16: 3.6}
    # Steps find verify4 at 1.0, five sixths of its probe: widths no step used are scaled
    # alike, once AUTO_COST_MIN_CALLS steps made it.
    for _ in range(AUTO_COST_MIN_CALLS):
        model.observe("chain", StepOutcome(3, 1, 1.9, target_s=1.0, rows=4, draft_s=0.6,
                                           draft_calls=3))  # fmt: skip
    costs = model.costs()
    assert costs.verify_s[4] == pytest.approx(1.0)
    assert costs.verify_s[8] == pytest.approx(1.5) and costs.verify_s[16] == pytest.approx(3.0)
    assert costs.decode_s == pytest.approx(1.0 * 5 / 6)
    assert costs.draft_s == pytest.approx(0.2)  # its own steps, not scaled
    assert costs.overhead_s["chain"] == pytest.approx(0.3)
    # A burst of slow steps moves the median only once it is most of the window.
    model.observe("chain", StepOutcome(3, 1, 9.9, target_s=9.0, rows=4, draft_s=0.6,
                                       draft_calls=3))  # fmt: skip
    assert model.costs().verify_s[4] == pytest.approx(1.0)
    # A wider verify never costs less than a narrower one.
    assert list(model.costs().verify_s.values()) == sorted(model.costs().verify_s.values())
    # A call's time counts for AUTO_STALE_STEPS steps: with fewer than AUTO_COST_MIN_CALLS
    # left, a call costs its probe time scaled as the calls steps make now compare with theirs.
    for _ in range(AUTO_COST_MIN_CALLS):
        model.observe("chain", StepOutcome(3, 1, 1.9, target_s=1.2, rows=8, draft_s=0.6,
                                           draft_calls=3))  # fmt: skip
    assert model.costs().verify_s[8] == pytest.approx(1.2)
    for _ in range(AUTO_STALE_STEPS - AUTO_COST_MIN_CALLS):
        model.observe("chain", StepOutcome(3, 1, 1.9, target_s=1.2, rows=4, draft_s=0.6,
                                           draft_calls=3))  # fmt: skip
    assert model.costs().verify_s[8] == pytest.approx(1.2)
    model.observe("chain", StepOutcome(3, 1, 1.9, target_s=1.2, rows=4, draft_s=0.6,
                                       draft_calls=3))  # fmt: skip
    assert model.costs().verify_s[8] == pytest.approx(1.8)  # its probe, scaled by verify4's
    # A new probe replaces a call's step times.
    model.add_probe(StepCosts({4: 2.4, 8: 2.5, 16: 3.6}, step_width=0))
    assert model.costs().verify_s[4] == pytest.approx(2.4)


def test_a_rare_width_s_few_calls_do_not_price_a_busy_wider_one() -> None:
    """The bundled pair's C++ trace: a 4-row verify's 4 calls, slow and early in a run,
    priced every 7-row step with a floor, while that width's own 16 calls said 30% less."""
    model = CostModel(WIDTHS)
    model.add_probe(StepCosts({4: 3.0, 8: 3.2, 16: 5.0}, draft_s=0.3, step_width=4, decode_s=2.5))
    for rows, seconds, steps in ((4, 4.8, 4), (8, 3.2, 16)):
        for _ in range(steps):
            model.observe("chain", StepOutcome(3, 1, seconds + 1, target_s=seconds, rows=rows,
                                               draft_s=0.6, draft_calls=3))  # fmt: skip
    verify = model.costs().verify_s
    assert verify[8] == pytest.approx(3.2)  # its own calls
    assert verify[4] == pytest.approx(3.2)  # held under the better-evidenced wider price
    # Probe-priced: scaled by the median of 1.6 (4 rows) and 1.0 (8 rows), 16 rows above
    # the floor, the decode (3.25) held under the 4-row price.
    assert verify[16] == pytest.approx(6.5)
    assert model.costs().decode_s == pytest.approx(3.2)


def test_ordered_prices_keep_the_best_evidenced_and_a_tie_floors() -> None:
    assert ordered([1.0, 2.0, 1.5], [16, 0, 16]) == [1.0, 1.5, 1.5]
    assert ordered([2.0, 1.0], [5, 5]) == [2.0, 2.0]  # a tie: the narrower's floor
    assert ordered([2.0, 1.0], [3, 16]) == [1.0, 1.0]
    assert ordered([0.0, 3.0, 0.0], [0, 0, 0]) == [0.0, 3.0, 3.0]  # unpriced: the floor


def test_a_call_no_step_made_for_long_costs_no_program_call() -> None:
    """A draft that never ran left every verify width stale each AUTO_STALE_STEPS steps,
    and timing them again cost 1.2-1.4% of Gemma 3 270M's time: the probe runs once, and
    the dispatcher asks for no timing after it, however long a way goes unused."""
    policy = _dispatcher([ChainShape(1)])
    fresh = Dispatcher([ChainShape(1)], WIDTHS)
    assert fresh.needs_costs()  # before the first step
    decode = Choice(NoDraftShape())
    for _ in range(3 * AUTO_STALE_STEPS):
        policy.observe(decode, _step(decode, 0, COSTS))
        assert not policy.needs_costs()
    assert policy.costs().verify_s[4] == pytest.approx(COSTS.verify_s[4])


def test_one_slow_first_step_does_not_write_a_kind_of_step_off() -> None:
    # Gemma 3 270M's first Python chain step paid 46 ms of one-time host work; priced by
    # that one step, chains never ran again in a whole benchmark. Host work counts from
    # AUTO_COST_MIN_CALLS steps of a kind, and a kind not run for AUTO_STALE_STEPS steps
    # forgets it: it is then priced at a decode's host work, the least any step does.
    policy = _dispatcher(_chains(3))
    first = policy.choose(None, 1 << 20)
    assert not first.decodes
    policy.observe(first, _step(first, first.shape.cost.max_height, COSTS, host=50.0))
    assert "chain" not in policy.costs().overhead_s
    assert not policy.choose(None, 1 << 20).decodes
    model = policy.model
    assert model is not None
    for _ in range(AUTO_COST_MIN_CALLS):
        model.observe("chain", _step(first, 1, COSTS, host=0.5))
    assert policy.costs().overhead_s["chain"] == pytest.approx(0.5)
    decode = Choice(NoDraftShape())
    for _ in range(AUTO_STALE_STEPS):
        model.observe("decode", _step(decode, 0, COSTS, host=0.1))
    assert policy.costs().overhead_s == pytest.approx({"decode": 0.1, "chain": 0.1, "tree": 0.1})


def test_a_kind_not_yet_priced_costs_a_decodes_host_work() -> None:
    """Priced at no host work before its third step, a one-token chain of a draft that
    never agrees looked as cheap as a decode (Gemma 3 270M, Python: 13.39 against 13.40
    ms), so it ran as sure to pay rather than as a probe the account charges."""
    policy = _dispatcher(_chains(3))
    model = policy.model
    assert model is not None
    decode = Choice(NoDraftShape())
    for _ in range(AUTO_COST_MIN_CALLS):
        model.observe("decode", _step(decode, 0, COSTS, host=0.4))
    costs = policy.costs()
    assert costs.overhead_s["chain"] == costs.overhead_s["tree"] == pytest.approx(0.4)
    assert costs.predict(ChainShape(1).cost, WIDTHS) > costs.predict(NoDraftShape().cost, WIDTHS)


def test_auto_stays_within_5_percent_of_the_fastest_chain() -> None:
    rng = random.Random(1)
    rates = [0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3]
    draw = _geometric(rng, rates)
    policy = _dispatcher(_chains())
    best = max(_expected(rates, n) / COSTS.predict(ChainShape(n).cost, WIDTHS) for n in range(1, 8))
    _run(policy, COSTS, 200, lambda c: draw(_height(c)))
    rate, used = _run(policy, COSTS, 3000, lambda c: draw(_height(c)))
    assert rate >= 0.95 * best, used


@pytest.mark.parametrize(("rates", "speculates"), [([0.05], False), ([0.8, 0.7, 0.6], True)])
def test_auto_stops_speculating_where_it_does_not_pay(rates: list[float], speculates: bool) -> None:
    """A draft that rarely agrees: a decode (0.8 s) beats every chain, and the dispatcher
    settles on it within a few dozen steps and probes the draft only now and then, costing
    under 2% against decoding alone; a draft that agrees keeps it speculating."""
    draw = _geometric(random.Random(5), rates)
    policy = _dispatcher(_chains())
    _run(policy, COSTS, 100, lambda c: draw(_height(c)))
    rate, used = _run(policy, COSTS, 2000, lambda c: draw(_height(c)))
    if speculates:
        assert used["none"] < 40
    else:
        assert used["none"] > 0.9 * 2000
        assert rate >= 0.98 / COSTS.decode_s


@pytest.mark.parametrize("shapes", ["chains", "chains and trees"])
def test_probes_of_a_draft_that_never_agrees_cost_at_most_the_probe_share(shapes: str) -> None:
    """A draft that agrees with nothing, over 40 requests of 128 steps (each request
    halves what was seen, so the draft looks worth a probe again at every start): what the
    probes lose stays within AUTO_PROBE_SHARE of the time, plus the account's opening
    credit (one request's worth) and one probe (about 10% without the account)."""
    trees = [StaticTree.pruned(7), DynamicTree(3, 4, 16)] if shapes != "chains" else []
    policy = _dispatcher([*_chains(), *trees])
    seconds = tokens = 0.0
    for _ in range(40):
        policy.begin()
        for _ in range(128):
            choice = policy.choose(None, 1 << 20)
            step = _step(choice, 0, COSTS)
            policy.observe(choice, step)
            seconds, tokens = seconds + step.seconds, tokens + step.emitted
    alone = tokens * COSTS.decode_s
    # The account earns its share of every step (probes' included) and may run one probe
    # into debt: its dearest probe's loss is the most it overdraws. (The first step also
    # runs a chain on the prior's mean alone: one more step's loss.)
    dearest = max(COSTS.predict(s.cost, WIDTHS) for s in policy.shapes) - COSTS.decode_s
    opening = AUTO_PROBE_SHARE * 128 * COSTS.decode_s
    assert seconds - alone <= AUTO_PROBE_SHARE * seconds + opening + 2 * dearest


def test_host_work_is_priced_per_verify_width() -> None:
    """Sampled, each row a step walks becomes a distribution over the vocabulary: Gemma 3
    270M's 15-token lookups spent 4.3-6.6 ms of host work (Python) against the 1.1 ms of
    its 4-row steps, and one median per kind of step priced them at the 4-row steps'. Each
    width is priced by its own steps, a width not yet seen by the kind's."""
    model = CostModel(WIDTHS)
    model.add_probe(COSTS)
    for _ in range(5):
        model.observe("chain", StepOutcome(3, 1, 1.1, target_s=1.0, rows=4))
    for _ in range(AUTO_COST_MIN_CALLS):
        model.observe("chain", StepOutcome(15, 9, 3.5, target_s=3.0, rows=16))
    costs = model.costs()
    assert costs.overhead_s["chain4"] == pytest.approx(0.1)
    assert costs.overhead_s["chain16"] == pytest.approx(0.5)
    assert costs.overhead_s["chain"] == pytest.approx(0.1)  # 5 of its 8 steps
    assert costs.predict(ChainShape(15).cost, WIDTHS, model=False) == pytest.approx(3.5)
    assert costs.predict(ChainShape(3).cost, WIDTHS, model=False) == pytest.approx(1.1)
    assert costs.predict(ChainShape(5).cost, WIDTHS, model=False) == pytest.approx(1.5 + 0.1)


def test_tree_steps_teach_the_chains_by_their_first_branch() -> None:
    """A tree's first branch is the chain the draft would have drafted: a step that accepted
    two of its first branch's three tokens counts as a chain3 step that accepted two."""
    policy = _dispatcher([ChainShape(3), StaticTree.pruned(7)])
    tree = policy.shapes[1]
    step = replace(_step(Choice(tree), 2, COSTS), main_height=3, main_accepted=2)
    policy.observe(Choice(tree), step)
    assert policy.chains.reached == [1, 1, 1] and policy.chains.accepted == [1, 1, 0]
    # The branch from the root through each first child, and how far a path followed it.
    built = DraftTree.build(5, [10, 11, 12, 13, 14], [0, 0, 1, 1, 3])  # rows 1, 3, 5 first
    assert built.first_branch([0, 1, 3, 5]) == (3, 3)
    assert built.first_branch([0, 1, 4]) == (3, 1)
    assert built.first_branch([0, 2]) == (3, 0)


def test_auto_cuts_each_lookup_offer_by_its_evidence() -> None:
    """Sampled prompt lookup on a base model: 1-gram matches accept ~0.2 per depth, 3-gram
    ones ~0.9. The dispatcher decodes instead of verifying 1-gram matches, verifies 3-gram
    matches long, and beats both drafting every match whole and drafting none."""
    costs = StepCosts({4: 1.4, 8: 2.1, 16: 3.5}, 0.0, 1, decode_s=1.0)
    rates = {"ngram1": 0.2, "ngram2": 0.5, "ngram3": 0.9}
    rng = random.Random(3)
    draws = {e: _geometric(rng, [r]) for e, r in rates.items()}
    policy = _dispatcher([], costs, lookup=True)
    offers: list[Offer] = []

    def offer() -> Offer:
        offers.append(Offer([0] * 7, rng.choice(sorted(rates))))
        return offers[-1]

    kept: dict[str, list[int]] = {e: [] for e in rates}

    def accept(choice: Choice) -> int:
        kept[offers[-1].evidence].append(choice.lookup)
        return draws[offers[-1].evidence](choice.lookup)

    _run(policy, costs, 300, accept, offer)
    kept = {e: [] for e in rates}
    rate, _ = _run(policy, costs, 1000, accept, offer)
    ones, threes = kept["ngram1"], kept["ngram3"]
    # Most 1-gram offers are declined (the rest are the optimism's probes), most 3-gram
    # ones verified whole.
    assert sum(k == 0 for k in ones) >= 0.7 * len(ones), ones
    assert sum(k == 7 for k in threes) >= 0.9 * len(threes), threes
    whole = sum(_expected([r], 7) for r in rates.values()) / (3 * 2.1)
    assert rate > 1.05 * max(whole, 1.0)


def test_the_model_runs_where_the_lookup_offers_nothing_or_little() -> None:
    """Combined: no offer on 70% of steps (the model, at 0.7 a depth, beats a decode), a
    3-gram offer on the others (the lookup, at 0.9, beats the model there). Each wins its
    own steps, and the whole beats either alone (by the expectations: 2.84 tokens/s against
    2.48 for the lookup alone, 1.95 for the model alone)."""
    costs = StepCosts({4: 1.1, 8: 1.4, 16: 2.0}, 0.05, 4, decode_s=1.0)
    rng = random.Random(7)
    model, lookup = _geometric(rng, [0.7]), _geometric(rng, [0.9])
    offers: list[Offer | None] = []

    def offer() -> Offer | None:
        offers.append(Offer([0] * 15, "ngram3") if rng.random() < 0.3 else None)
        return offers[-1]

    def accept(choice: Choice) -> int:
        # The model is as good where the lookup offers; the lookup only where it does.
        return lookup(choice.lookup) if choice.lookup else model(_height(choice))

    def rate_of(**kw) -> tuple[float, Counter[str]]:  # type: ignore[no-untyped-def]
        policy = _dispatcher(_chains() if kw.get("model", True) else [], costs,
                             lookup=kw.get("lookup", True))  # fmt: skip
        _run(policy, costs, 200, accept, offer)
        return _run(policy, costs, 2000, accept, offer)

    both, used = rate_of()
    assert used["lookup"] > 0.25 * 2000 and used["none"] < 0.05 * 2000
    assert both > 1.05 * rate_of(lookup=False)[0]
    assert both > 1.05 * rate_of(model=False)[0]


def test_the_draft_s_record_is_one_whatever_the_lookup_offered() -> None:
    """The model's chain acceptance is pooled over the steps with and without an offer
    beside them: a draft seen agreeing through every depth on dozens of steps beside 1-gram
    offers (which never pay) is not written off on the text without an offer after two
    unlucky looks there. (Kept per offer evidence, that record was two steps thin and the
    dispatcher fell back to a decode.)"""
    policy = _dispatcher(_chains(), lookup=True)
    _run(policy, COSTS, 40, lambda c: 0 if c.lookup else _height(c),
         lambda: Offer([0] * 15, "ngram1"))  # fmt: skip
    for _ in range(2):
        choice = policy.choose(None, 1 << 20)
        assert choice.shape.name == "chain7"
        policy.observe(choice, _step(choice, 0, COSTS))
    # With the probe account in debt, only a way sure to pay on its mean runs: the draft's
    # mean is its record over all 42 steps, not the two without an offer.
    policy._credit = -1.0
    assert policy.choose(None, 1 << 20).shape.name == "chain7"


@pytest.mark.parametrize("shadow", [False, True])
def test_an_offer_passed_over_is_scored_against_what_the_step_emitted(shadow: bool) -> None:
    """Greedy answers from a passage: the text copies it, so prompt lookup's 15-token offer
    holds at 0.97 a depth, and the model's chains accept 0.9 a depth. The lookup's first
    verify of that evidence was unlucky (nothing accepted): scored only when verified, the
    offer lost to the model's chains ever after; scored also against what the model's steps
    emitted (``shadow``), it is verified again and wins (measured on the default Gemma
    export before: 0.83 of prompt lookup alone)."""
    costs = StepCosts({4: 1.3, 8: 1.6, 16: 2.2}, 0.05, 4, decode_s=1.0)
    rng = random.Random(11)
    model = _geometric(rng, [0.9])
    policy = _dispatcher(_chains(), costs, lookup=True)
    offered = Offer(list(range(100, 115)), "ngram3")
    policy.choose(offered, 1 << 20)
    policy.observe(
        Choice(NoDraftShape(), 15),
        replace(_step(Choice(NoDraftShape(), 15), 0, costs), evidence="ngram3"),
    )
    used: Counter[str] = Counter()
    tokens, seconds = 0, 0.0
    for _ in range(400):
        agree = _geometric(rng, [0.97])(15)  # how far the text goes on as the offer
        choice = policy.choose(offered, 1 << 20)
        accepted = min(choice.lookup, agree) if choice.lookup else model(_height(choice))
        step = _step(choice, accepted, costs)
        if choice.lookup:
            step = replace(step, evidence=offered.evidence)
        policy.observe(choice, step)
        if shadow and not choice.lookup:
            emitted = [*offered.tokens[: min(agree, step.emitted)], -1][: step.emitted]
            policy.shadow(offered, emitted)
        used["lookup" if choice.lookup else choice.shape.name] += 1
        tokens += step.emitted
        seconds += step.seconds
    if shadow:
        assert used["lookup"] > 0.8 * 400, used
        assert tokens / seconds > 1.5 * _expected([0.9], 7) / (1.6 + 2 * 0.05), used
    else:
        assert used["lookup"] < 0.1 * 400, used  # what the default did on those prompts


def test_depth_acceptance_cap_keeps_the_rates_and_bounds_the_weight() -> None:
    acc = DepthAcceptance()
    for accepted in (3, 3, 1, 0, 2, 3, 0, 1):
        acc.observe(3, accepted)
    rates = [a / r for a, r in zip(acc.accepted, acc.reached, strict=True)]
    acc.cap(4.0)
    assert acc.reached[0] == pytest.approx(4.0)
    assert [a / r for a, r in zip(acc.accepted, acc.reached, strict=True)] == pytest.approx(rates)
    before = list(acc.reached)
    acc.cap(5.0)  # already within: untouched
    assert acc.reached == before


def _lookup_request(policy: Dispatcher, rng: random.Random, rate: float, steps: int) -> int:
    """One request of ``steps`` steps, each offered a 1-gram match whose tokens the text
    goes on with at ``rate`` a depth; offers passed over are scored (``shadow``). Returns
    the steps that verified the offer."""
    costs = policy.costs()
    agree = _geometric(rng, [rate])
    offered = Offer(list(range(100, 104)), "ngram1")
    policy.begin()
    verified = 0
    for _ in range(steps):
        goes_on = agree(4)
        choice = policy.choose(offered, 1 << 20)
        step = _step(choice, goes_on, costs)
        if choice.lookup:
            verified += 1
            step = replace(step, evidence=offered.evidence)
        policy.observe(choice, step)
        if not choice.lookup:
            policy.shadow(offered, [*offered.tokens[:goes_on], -1][: step.emitted])
    return verified


@pytest.mark.parametrize(
    ("before", "now", "verified"), [(0.5, 0.03, (0, 24)), (0.03, 0.6, (110, 120))]
)
def test_a_lookup_is_judged_on_the_new_request_within_a_few_steps(
    before: float, now: float, verified: tuple[int, int]
) -> None:
    """Sampled summaries: a 1-gram match that paid half its verifies over a long answer
    fails on the next one (4%). What the first answer taught (hundreds of steps, most of
    them offers passed over and scored) is cut to AUTO_REQUEST_PRIOR_STEPS steps' worth at
    the new request, so the failing lookup runs on at most 24 of its 120 steps (6-14 here;
    52 with the counts only halved); and a lookup written off before runs on at least 110
    of the new request's 120 steps where it now pays (all here; 57 with them halved)."""
    costs = StepCosts({4: 1.25, 8: 1.6, 16: 2.2}, 0.0, 1, decode_s=1.0)
    rng = random.Random(5)
    policy = _dispatcher([], costs, lookup=True)
    for _ in range(3):
        _lookup_request(policy, rng, before, 400)
    runs = [_lookup_request(policy, random.Random(seed), now, 120) for seed in range(4)]
    lo, hi = verified
    assert all(lo <= r <= hi for r in runs), runs


def _model_request(policy: Dispatcher, rng: random.Random, rate: float, steps: int) -> int:
    """One request of ``steps`` steps whose draft is accepted at ``rate`` a depth and whose
    calls take ``GEMMA_COSTS``; returns the steps that drafted."""
    agree = _geometric(rng, [rate])
    policy.begin()
    drafted = 0
    for _ in range(steps):
        choice = policy.choose(None, 1 << 20)
        accepted = 0 if choice.decodes else agree(_height(choice))
        policy.observe(choice, _step(choice, accepted, GEMMA_COSTS))
        drafted += not choice.decodes
    return drafted


# Gemma 3 270M's calls in decodes (docs/results: verify 4 / 8 / 16 rows 1.35 / 2.0 / 2.6).
GEMMA_COSTS = StepCosts({4: 1.35, 8: 2.0, 16: 2.6}, 0.08, 1, decode_s=1.0)


@pytest.mark.parametrize(("now", "drafted"), [(0.15, (0, 26)), (0.7, (80, 80))])
def test_a_draft_is_judged_on_the_new_request_within_a_few_steps(
    now: float, drafted: tuple[int, int]
) -> None:
    """Sampled, a draft's acceptance moves from request to request with the text drawn.
    After three requests at 0.7 a depth, one at 0.15 (where a decode is faster) drafts on
    at most 26 of its 80 steps (7-23 here; 32-43 with the earlier requests' counts only
    halved, about 20 steps' worth: AUTO_REQUEST_PRIOR_STEPS cuts them to 2), and one at
    0.7 still drafts on every step."""
    policy = _dispatcher(_chains(), GEMMA_COSTS)
    rng = random.Random(5)
    for _ in range(3):
        _model_request(policy, rng, 0.7, 80)
    runs = [_model_request(deepcopy(policy), random.Random(s), now, 80) for s in range(8)]
    lo, hi = drafted
    assert all(lo <= r <= hi for r in runs), runs


@pytest.mark.parametrize(("tree_accepts", "winner"), [(1, "chain3"), (2, "tree")])
def test_auto_tries_both_and_picks_between_chain_and_tree(tree_accepts: int, winner: str) -> None:
    rng = random.Random(2)
    rates = [0.4, 0.3, 0.2]  # chain3: 1.544 tokens / 1.6 s
    costs = StepCosts({4: 1.0, 8: 1.5, 16: 1.5}, 0.15, 4, decode_s=1.0)
    tree = DynamicTree(3, 4, 16)  # 1.5 + 4 * 0.15 = 2.1 s: 2 tokens 0.95/s, 3 1.43/s
    draw = _geometric(rng, rates)
    policy = _dispatcher([ChainShape(3), tree], costs, decode=False)

    def accept(choice: Choice) -> int:
        return draw(3) if choice.shape.name == "chain3" else tree_accepts

    _, first = _run(policy, costs, 10, accept)
    assert len(first) == 2  # both tried early, while their bounds are wide
    # Probes take at most AUTO_PROBE_SHARE of the time: the choice settles within a few
    # hundred steps (an unlucky first look at chain3 is looked at again that slowly).
    _run(policy, costs, 400, accept)
    rate, used = _run(policy, costs, 400, accept)
    assert used[tree.name if winner == "tree" else "chain3"] > 0.7 * 400
    # Within 5% of the better one's expectation (chain3: 1.544 tokens in 1.45 s).
    best = max((tree_accepts + 1) / 2.1, _expected(rates, 3) / 1.45)
    assert rate >= 0.95 * best


def test_a_fixed_shape_weighed_against_offers_never_decodes() -> None:
    policy = _dispatcher([ChainShape(3)], decode=False, lookup=True)
    assert [s.name for s in policy.candidates()] == ["chain3"]
    assert policy.choose(None, 10).shape.name == "chain3"
    assert policy.choose(Offer([1, 2], "ngram2"), 10).lookup == 2  # unseen: the lookup
    # The budget's last tokens: the chain grows what is left.
    assert policy.choose(None, 2).shape.name == "chain3"
    lookup_only = _dispatcher([], lookup=True)
    assert lookup_only.choose(None, 10).decodes
    with pytest.raises(EtspecError, match="no candidate"):
        Dispatcher([], WIDTHS)


def test_auto_keeps_choosing_under_background_load() -> None:
    """Every call slowed by a burst now and then (a background process on the same cores):
    the costs are medians of recent calls, so the choice holds: within 5% of the best fixed
    way under the same bursts, and ahead of decoding alone (the least-of-five probe alone
    put the draft in 1-2% of steps under load). chain2 pays 5% over a decode here, so a
    look at its mean below the decode's is common: the draft then runs on its mean or as a
    probe (AUTO_PROBE_SHARE), not on every step."""

    def rate_of(policy: Dispatcher | TreeShape) -> float:
        rng = random.Random(9)
        draw = _geometric(rng, [0.55])

        def slow() -> float:
            return 3.0 if rng.random() < 0.1 else 1.0 + rng.uniform(0, 0.3)

        if not isinstance(policy, Dispatcher):
            tokens, seconds = 0, 0.0
            for _ in range(1200):
                step = _step(Choice(policy), draw(policy.cost.max_height), COSTS, slow())
                tokens, seconds = tokens + step.emitted, seconds + step.seconds
            return tokens / seconds
        _run(policy, COSTS, 200, lambda c: draw(_height(c)), slow=slow)
        rate, used = _run(policy, COSTS, 1000, lambda c: draw(_height(c)), slow=slow)
        assert used["none"] < 0.6 * 1000, used
        return rate

    auto = rate_of(_dispatcher(_chains()))
    fixed = [rate_of(ChainShape(n)) for n in (1, 2, 3)]
    assert auto >= 0.95 * max(fixed)
    assert auto > 1.03 * rate_of(NoDraftShape())


def test_auto_candidates_follow_the_artifact() -> None:
    meta = TargetMetadata(
        format_version=1, model_family="llama", vocab_size=10, hidden_size=4, num_layers=4,
        layer_types="full", sliding_window=0,
        max_context=64, cache_size=80, prefill_chunk=8, verify_width=16, verify_widths=(4, 16),
        hidden_state_point="layer_input", hidden_state_layers=(1,), bos_token_id=1,
        eos_token_ids=(2,), kv_strategies="position-overwrite", kv_cache_bytes=0, dtype="fp32",
        backend="xnnpack", tokenizer_sha256="", assistant="", assistant_step_width=0,
    )  # fmt: skip
    names = [s.name for s in auto_candidates(meta, branching=True)]
    chains = [f"chain{n}" for n in range(1, 8)]
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

    class Drafter(SpeculativeDraftRunner):
        def prefill(self, *a):  # type: ignore[no-untyped-def]
            return 0

        def propose(self, *a):  # type: ignore[no-untyped-def]
            raise AssertionError

        def accept(self, *a):  # type: ignore[no-untyped-def]
            return 0

        def reset(self) -> None:
            pass

    model, lookup, both = Drafter(), Drafter(), Drafter()
    model.branching = both.branching = True
    lookup.has_model, lookup.offers = False, True
    both.offers = True
    auto = tree_policy(TreeSettings("auto"), meta, model)
    assert isinstance(auto, Dispatcher) and not auto.takes_offers
    assert [s.name for s in auto.candidates()] == ["none", *names]
    only = tree_policy(TreeSettings("auto"), meta, lookup)
    assert isinstance(only, Dispatcher) and [s.name for s in only.candidates()] == ["none"]
    dynamic = tree_policy(TreeSettings("dynamic"), meta, model)
    assert dynamic.name == "dynamic-d3k4t16"  # type: ignore[attr-defined]
    static = tree_policy(TreeSettings("static", static_tree="D2xBF2"), meta, lookup)
    assert static.name == "D2xBF2"  # type: ignore[attr-defined]
    weighed = tree_policy(TreeSettings("chain"), meta, both)
    assert isinstance(weighed, Dispatcher) and [s.name for s in weighed.candidates()] == ["chain3"]
    with pytest.raises(EtspecError, match="unknown --tree 'bush'"):
        TreeSettings("bush")
    with pytest.raises(EtspecError, match="--num-spec-tokens"):
        TreeSettings("chain", num_spec_tokens=0)


WEAK_COSTS = StepCosts({4: 12.6, 8: 15.2, 16: 20.0}, 0.5, 4, decode_s=11.5)


@pytest.mark.parametrize("rates", [[0.42, 0.5, 0.48, 0.45], [0.34, 0.35, 0.33, 0.3]])
def test_auto_keeps_short_chains_for_a_weak_draft(rates: list[float]) -> None:
    """Gemma 3 270M's draft and costs (ms; Python runtime, default export): a third to
    0.4 of draft tokens accepted, chain2 or chain3 fastest."""
    draw = _geometric(random.Random(3), rates)
    policy = _dispatcher(_chains(), WEAK_COSTS)
    best = max(
        _expected(rates, n) / WEAK_COSTS.predict(ChainShape(n).cost, WIDTHS) for n in range(1, 8)
    )
    best = max(best, 1 / WEAK_COSTS.decode_s)
    _run(policy, WEAK_COSTS, 200, lambda c: draw(_height(c)))
    rate, used = _run(policy, WEAK_COSTS, 3000, lambda c: draw(_height(c)))
    assert rate >= 0.95 * best, used


# Recorded on the bundled pair: the tokens each chain7 and N7 step accepted over 164
# HumanEval prompts, and the per-call costs of the same run (its "about" says how).
TRACE = json.loads((Path(__file__).parents[2] / "data" / "dispatch_trace_bundled.json").read_text())
TRACE_COSTS = StepCosts(
    {int(w): s for w, s in TRACE["costs"]["verify_s"].items()},
    TRACE["costs"]["draft_step_s"],
    TRACE["costs"]["step_width"],
    decode_s=TRACE["costs"]["verify_s"]["4"] * 0.9,
)
CHAIN7 = [int(a) for prompt in TRACE["accepted"]["chain7"] for a in prompt]
N7 = [int(a) for prompt in TRACE["accepted"]["N7"] for a in prompt]


def _replay_trace(
    policy: Dispatcher | TreeShape, chain7: list[int], seed: int, tokens: int = 12000
) -> float:
    """Tokens/s of ``policy`` over the recorded acceptance (a chain of length L accepts
    ``min(a, L)`` of chain7's ``a``; trees read N7's steps), each step timed by the recorded
    costs plus host work, with +-10..30% noise and a 5x hiccup in 1% of steps."""
    rng = random.Random(seed)
    if isinstance(policy, Dispatcher):
        policy.use_costs(TRACE_COSTS)
    chains = trees = emitted = 0
    seconds = 0.0
    while emitted < tokens:
        choice = policy.choose(None, 1 << 20)
        shape = choice.shape
        if isinstance(shape, ChainShape):
            accepted = min(chain7[chains % len(chain7)], shape.length)
            chains += 1
        else:
            accepted = N7[trees % len(N7)]
            trees += 1
        slow = (1 + rng.uniform(-0.1, 0.3)) * (5 if rng.random() < 0.01 else 1)
        host = TRACE["host_s"]["chain" if isinstance(shape, ChainShape) else "tree"]
        step = _step(choice, accepted, TRACE_COSTS, slow, host * slow)
        emitted += step.emitted
        seconds += step.seconds
        policy.observe(choice, step)
    return emitted / seconds


def _regret(shapes: Callable[[], list[TreeShape]], chain7: list[int], seed: int) -> float:
    best = max(_replay_trace(s, chain7, seed) for s in shapes())
    return 1 - _replay_trace(Dispatcher(shapes(), WIDTHS), chain7, seed) / best


@pytest.mark.parametrize("offset", [0, 1000, 2000, 3000])
def test_auto_regret_on_the_recorded_trace_is_under_5_percent(offset: int) -> None:
    def shapes() -> list[TreeShape]:
        return [*(ChainShape(n) for n in range(2, 8)), StaticTree.pruned(7)]

    chain7 = CHAIN7[offset:] + CHAIN7[:offset]
    assert _regret(shapes, chain7, seed=offset) < 0.05


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_recovers_from_an_unlucky_start(seed: int) -> None:
    # 60 poorly accepted steps first (the dispatcher's first look at depths 3..7 is bad),
    # then the recorded text.
    rng = random.Random(5)
    chain7 = [min(int(rng.expovariate(1.5)), 7) for _ in range(60)] + CHAIN7

    def shapes() -> list[TreeShape]:
        return [ChainShape(n) for n in range(2, 8)]

    assert _regret(shapes, chain7, seed) < 0.03
