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
from etspec.runtime.speculative.shapes import ChainShape, chain_cost
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
    steps = len(req["depths"])
    offers = req.get("offers", [1 << 20] * steps)
    evidence = req.get("evidence", [""] * steps)
    for depth, noise, offer, found in zip(
        req["depths"], req["noise"], offers, evidence, strict=True
    ):
        shape = policy.choose()
        height, allowed = min(offer, shape.cost.max_height), shape.cost.max_height
        if found and height:
            keep = policy.trim(shape, height, found)
            if keep < height:
                height = allowed = keep
        ran = chain_cost(height) if isinstance(shape, ChainShape) else shape.cost
        seconds = costs.predict(ran, meta.verify_widths) * (1 + noise)
        policy.observe(
            shape, StepOutcome(height, min(depth, height), seconds, allowed, True, found or None)
        )
        chosen.append(shape.name + (f"/{height}" if found else ""))
    names = [s.name for s in policy.shapes]
    return {"candidates": names, "chosen": chosen,
            "estimates": {s.name: policy.estimate(s) for s in policy.shapes}}  # fmt: skip


def _scenario(  # type: ignore[type-arg]
    seed: int, accept: float, widths: list[int], branching: bool, lookup: str = ""
) -> dict:
    """Recorded costs of the bundled pair's kind (verify cost growing with width, a draft
    step a quarter of a verify) and `accept`-geometric accepted depths, with timing noise.
    ``lookup``: prompt lookup's matches of 0-8 tokens (``"offers"``), found by 1-3-grams
    that accept `accept` ** (3 / n) per depth (``"evidence"``)."""
    rng = random.Random(seed)
    depths, evidence = [], []
    for _ in range(300):
        n = rng.choice((1, 1, 2, 3))
        p = accept ** (3 / n) if lookup == "evidence" else accept
        d = 0
        while rng.random() < p and d < 20:
            d += 1
        depths.append(d)
        evidence.append(f"ngram{n}")
    extra = {}
    if lookup:
        extra["offers"] = [rng.choice((0, 1, 2, 2, 3, 5, 8)) for _ in depths]
    if lookup == "evidence":
        extra["evidence"] = [e if o else "" for e, o in zip(evidence, extra["offers"], strict=True)]
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
    } | extra


@pytest.mark.parametrize(
    ("seed", "accept", "widths", "branching", "lookup"),
    [
        (0, 0.8, [4, 8, 16], True, ""),
        (1, 0.5, [4, 8, 16], True, ""),
        (2, 0.75, [4, 8], False, ""),
        (3, 0.3, [8, 16, 72], True, ""),
        (4, 0.7, [4], True, ""),
        (5, 0.05, [4, 8, 16], False, ""),  # a draft that rarely agrees: drafting nothing wins
        (6, 0.5, [4, 8, 16], False, "offers"),  # prompt lookup: matches of 0-8 tokens
        (7, 0.5, [4, 8, 16], False, "evidence"),  # ... cut by their n-gram's acceptance
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
