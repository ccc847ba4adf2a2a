"""The dispatcher in C++ (speculative/dispatcher.cpp) against the Python one
(runtime/speculative/dispatcher.py): the same candidates and, on the same recorded costs,
offers and acceptance sequence, the same choice at every step (and the same estimates at the
end)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from etspec.runtime.speculative.dispatcher import Dispatcher
from etspec.runtime.speculative.settings import auto_candidates
from etspec.runtime.speculative.step import Offer, StepCosts, StepOutcome


def _width(widths: list[int], rows: int) -> int:
    return next((w for w in widths if w >= rows), widths[-1])


def _python(req: dict) -> dict:  # type: ignore[type-arg]
    """The replay of runtime/cpp/tools/dispatch_replay.cpp, on the Python dispatcher."""
    widths = req["verify_widths"]
    meta = SimpleNamespace(
        verify_width=req["verify_width"], verify_widths=tuple(widths), row_quantized=False
    )
    c = req["costs"]
    costs = StepCosts({int(w): s for w, s in c["verify_s"].items()}, c["draft_s"],
                      c["step_width"], c["decode_s"])  # fmt: skip
    shapes = auto_candidates(meta, req["branching"]) if req["model"] else []  # type: ignore[arg-type]
    policy = Dispatcher(shapes, meta.verify_widths, decode=req["decode"], lookup=req["lookup"])
    policy.use_costs(costs)
    chosen = []
    for i, (depth, noise, offered, found) in enumerate(
        zip(req["depths"], req["noise"], req["offers"], req["evidence"], strict=True)
    ):
        if i == len(req["depths"]) // 2:
            policy.begin()  # a second request
        offer = Offer([0] * offered, found) if offered else None
        choice = policy.choose(offer, 1 << 20)
        slow = 1 + noise
        if choice.decodes:
            target_s = costs.decode_s * slow
            step = StepOutcome(0, 0, target_s + 0.0002 * slow, target_s=target_s, rows=1)
            name = choice.shape.name
        elif choice.lookup:
            m = choice.lookup
            rows = _width(widths, m + 1)
            target_s = costs.verify_s[rows] * slow
            step = StepOutcome(m, min(depth, m), target_s + 0.0003 * slow, m, found, target_s, rows)
            name = f"lookup{m}"
        else:
            cost = choice.shape.cost
            rows = _width(widths, cost.max_nodes + 1)
            target_s = costs.verify_s[rows] * slow
            # The catch-up (one extend, twice a level's seconds), then the levels; a
            # tree's level costs half again a chain's (its gathers).
            calls, extend_s = 1 + cost.levels, 2 * costs.draft_s * slow
            level = 1.5 if cost.max_nodes > cost.max_height else 1.0
            draft_s = extend_s + cost.levels * level * costs.draft_s * slow
            main = cost.max_height - 1 if cost.max_nodes > cost.max_height else 0
            step = StepOutcome(
                cost.max_height, min(depth, cost.max_height),
                target_s + draft_s + 0.0004 * slow, cost.max_height, None,
                target_s, rows, draft_s, calls, main, min(depth, main), extend_s, 1,
            )  # fmt: skip
            name = choice.shape.name
        policy.observe(choice, step)
        if offer is not None and not choice.lookup:  # the text follows the offer for `depth`
            emitted = step.emitted
            policy.shadow(offer, [0] * min(depth, emitted) + [1] * max(0, emitted - depth))
        chosen.append(name)
    names = [s.name for s in policy.candidates()]
    return {"candidates": names, "chosen": chosen, "rated": policy.rated,
            "estimates": {s.name: policy.estimate(s) for s in policy.candidates()}}  # fmt: skip


def _scenario(  # type: ignore[type-arg]
    seed: int,
    accept: float,
    widths: list[int],
    branching: bool,
    lookup: bool,
    model: bool = True,
    steps: int = 300,
) -> dict:
    """Recorded costs of the bundled pair's kind (verify cost growing with width, a draft
    call a third of a decode) and `accept`-geometric accepted depths, with timing noise.
    ``lookup``: prompt lookup's matches of 0-8 tokens found by 1-3-grams that accept
    `accept` ** (3 / n) per depth."""
    rng = random.Random(seed)
    depths, evidence, offers = [], [], []
    for _ in range(steps):
        n = rng.choice((1, 1, 2, 3))
        offered = rng.choice((0, 1, 2, 2, 3, 5, 8)) if lookup else 0
        p = accept ** (3 / n) if offered else accept
        d = 0
        while rng.random() < p and d < 20:
            d += 1
        depths.append(d)
        offers.append(offered)
        evidence.append(f"ngram{n}" if offered else "")
    return {
        "verify_width": widths[-1],
        "verify_widths": widths,
        "branching": branching,
        "model": model,
        "decode": True,
        "lookup": lookup,
        "costs": {
            "verify_s": {str(w): 0.002 + 0.0001 * w for w in widths},
            "draft_s": 0.0006,
            "step_width": 4,
            "decode_s": 0.0018,
        },
        "depths": depths,
        "noise": [rng.uniform(-0.2, 0.6) for _ in depths],
        "offers": offers,
        "evidence": evidence,
    }


@pytest.mark.parametrize(
    ("seed", "accept", "widths", "branching", "lookup", "model"),
    [
        (0, 0.8, [4, 8, 16], True, False, True),
        (1, 0.5, [4, 8, 16], True, False, True),
        (2, 0.75, [4, 8], False, False, True),
        (3, 0.3, [8, 16, 72], True, False, True),
        (4, 0.7, [4], True, False, True),
        (5, 0.05, [4, 8, 16], False, False, True),  # a draft that rarely agrees: decode wins
        (6, 0.5, [4, 8, 16], False, True, False),  # prompt lookup alone
        (7, 0.6, [4, 8, 16], False, True, True),  # the model and prompt lookup combined
    ],
)
def test_cpp_dispatcher_chooses_as_python(  # type: ignore[no-untyped-def]
    runner_bin: Path, tmp_path: Path, seed, accept, widths, branching, lookup, model
) -> None:
    req = _scenario(seed, accept, widths, branching, lookup, model)
    (tmp_path / "req.json").write_text(json.dumps(req))
    tool = runner_bin.parent / "etspec_dispatch_replay"
    res = subprocess.run([str(tool), str(tmp_path / "req.json")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got, want = json.loads(res.stdout), _python(req)
    assert got["candidates"] == want["candidates"]
    assert got["chosen"] == want["chosen"]
    assert len(set(got["chosen"])) > 1  # the replay exercises the choice, not one way
    # Settled decodes (contract.AUTO_SETTLED_DRIFT) on the same steps: where a decode leads,
    # the steps after it are not rated.
    assert got["rated"] == want["rated"]
    if seed == 5:
        assert want["rated"] < len(req["depths"]) // 2
    for name, rate in want["estimates"].items():
        assert got["estimates"][name] == pytest.approx(rate, rel=1e-12), name


def test_cpp_dispatcher_forgets_stale_calls_as_python(runner_bin: Path, tmp_path: Path) -> None:
    """A draft that seldom pays for 1,500 steps: the verify widths it leaves unused forget
    their step times (contract.AUTO_STALE_STEPS) at the same steps in both runtimes, and the
    choices and estimates that follow stay the same."""
    req = _scenario(9, 0.3, [4, 8, 16], False, False, steps=1500)
    (tmp_path / "req.json").write_text(json.dumps(req))
    tool = runner_bin.parent / "etspec_dispatch_replay"
    res = subprocess.run([str(tool), str(tmp_path / "req.json")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got, want = json.loads(res.stdout), _python(req)
    assert got["chosen"] == want["chosen"] and got["rated"] == want["rated"]
    assert "none" in want["chosen"] and len(set(want["chosen"])) > 1
    for name, rate in want["estimates"].items():
        assert got["estimates"][name] == pytest.approx(rate, rel=1e-12), name
