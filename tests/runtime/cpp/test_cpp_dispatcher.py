"""--tree auto's dispatcher in C++ (speculative/dispatcher.cpp) against the Python one
(runtime/speculative/dispatcher.py): the same candidates and, on the same recorded costs and
acceptance sequence, the same shape at every step (and the same estimates at the end)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from etspec.runtime.speculative.dispatcher import AutoTree
from etspec.runtime.speculative.settings import auto_candidates
from etspec.runtime.speculative.step import StepCosts, StepOutcome


def _python(req: dict) -> dict:  # type: ignore[type-arg]
    """The replay of runtime/cpp/tools/dispatch_replay.cpp, on the Python dispatcher."""
    meta = SimpleNamespace(
        verify_width=req["verify_width"], verify_widths=tuple(req["verify_widths"]), dtype="fp32"
    )
    c = req["costs"]
    costs = StepCosts({int(w): s for w, s in c["verify_s"].items()}, c["draft_step_s"],
                      c["draft_extend_s"], c["step_width"], c["decode_s"])  # fmt: skip
    policy = AutoTree(auto_candidates(meta, req["branching"]), meta.verify_widths)  # type: ignore[arg-type]
    policy.use_costs(costs)
    chosen = []
    offers = req.get("offers", [1 << 20] * len(req["depths"]))
    for depth, noise, offer in zip(req["depths"], req["noise"], offers, strict=True):
        shape = policy.choose()
        height = min(offer, shape.cost.max_height)
        seconds = costs.predict(shape.cost, meta.verify_widths) * (1 + noise)
        policy.observe(
            shape, StepOutcome(height, min(depth, height), seconds, shape.cost.max_height)
        )
        chosen.append(shape.name)
    names = [s.name for s in policy.shapes]
    return {"candidates": names, "chosen": chosen,
            "estimates": {s.name: policy.estimate(s) for s in policy.shapes}}  # fmt: skip


def _scenario(  # type: ignore[type-arg]
    seed: int, accept: float, widths: list[int], branching: bool, lookup: bool = False
) -> dict:
    """Recorded costs of the bundled pair's kind (verify cost growing with width, a draft
    step a quarter of a verify) and `accept`-geometric accepted depths, with timing noise."""
    rng = random.Random(seed)
    depths = []
    for _ in range(300):
        d = 0
        while rng.random() < accept and d < 20:
            d += 1
        depths.append(d)
    return {
        "verify_width": widths[-1],
        "verify_widths": widths,
        "branching": branching,
        "costs": {
            "verify_s": {str(w): 0.002 + 0.0001 * w for w in widths},
            "draft_step_s": 0.0006,
            "draft_extend_s": 0.0007,
            "step_width": 4,
            "decode_s": 0.0018,
        },
        "depths": depths,
        "noise": [rng.uniform(-0.2, 0.6) for _ in depths],
    } | ({"offers": [rng.choice((0, 1, 2, 2, 3, 5, 8)) for _ in depths]} if lookup else {})


@pytest.mark.parametrize(
    ("seed", "accept", "widths", "branching", "lookup"),
    [
        (0, 0.8, [4, 8, 16], True, False),
        (1, 0.5, [4, 8, 16], True, False),
        (2, 0.75, [4, 8], False, False),
        (3, 0.3, [8, 16, 72], True, False),
        (4, 0.7, [4], True, False),
        (5, 0.05, [4, 8, 16], False, False),  # a draft that rarely agrees: drafting nothing wins
        (6, 0.9, [4, 8, 16], False, True),  # prompt lookup: matches of 0-8 tokens
    ],
)
def test_cpp_dispatcher_chooses_as_python(  # type: ignore[no-untyped-def]
    runner_bin: Path, tmp_path: Path, seed, accept, widths, branching, lookup
) -> None:
    req = _scenario(seed, accept, widths, branching, lookup)
    (tmp_path / "req.json").write_text(json.dumps(req))
    tool = runner_bin.parent / "etspec_dispatch_replay"
    res = subprocess.run([str(tool), str(tmp_path / "req.json")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got, want = json.loads(res.stdout), _python(req)
    assert got["candidates"] == want["candidates"]
    assert got["chosen"] == want["chosen"]
    assert len(set(got["chosen"])) > 1  # the replay exercises the choice, not one shape
    for name, rate in want["estimates"].items():
        assert got["estimates"][name] == pytest.approx(rate, rel=1e-12), name
