"""``--tree auto``'s dispatcher on synthetic requests: what share of the available speedup it
takes, with no timing noise.

A bench run on Gemma 3 270M times a machine: one unseeded sampled run of the same code moved
auto/chain3 on one set between 0.79 and 1.09, so a change to the dispatcher's arithmetic is
hard to judge from it. Here each request's draft is accepted at a rate per depth drawn from a
scenario (a geometric chain: depth d accepted with that rate given the shallower ones were),
every call costs what Gemma 3 270M's do in decodes, and the real ``Dispatcher`` chooses every
step. Per scenario it reports the tokens per decode-time (1.0: target-only), the slowest
request, the requests below 0.95, and the share of the best fixed chain's gain over a decode
that auto took ("capture", over requests where a chain gains over 2%). The same seeds give the
same figures, so two versions of the dispatcher (or ``--set`` overrides of its constants:
``--set AUTO_Z=1.5``) compare request for request.

    python scripts/dispatch_sim.py [--scenarios zero,mid,mixed] [--set AUTO_Z=1.5] \
        [--verify-costs 1.5,2.2,2.9] [--draft-cost 0.08] [--catch-up 0.5] [--opening 1] \
        [--json OUT]

``--verify-costs`` and ``--draft-cost`` price the calls for another machine (in decodes);
``--catch-up`` adds the draft's catch-up over the prompt (in decodes) to a request's first
draft step, as the runtime's step time includes it, and with it a draft step after decodes
pays one more draft call, its catch-up over the decoded positions. ``--opening N`` rejects
the first N draft steps of every request whatever its rate: a real answer's opening steps
are streaky (Gemma 3 270M greedy: 9 of 36 task prompts rejected their first three).
"""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from etspec.contract import AUTO_MAX_CHAIN, DEFAULT_VERIFY_WIDTHS
from etspec.runtime.speculative import acceptance, costs, dispatcher
from etspec.runtime.speculative.dispatcher import Dispatcher, auto_chain_lengths
from etspec.runtime.speculative.shapes import ChainShape, Choice
from etspec.runtime.speculative.step import StepCosts, StepOutcome

WIDTHS = DEFAULT_VERIFY_WIDTHS  # the default export's (Gemma 3 270M's)
# Gemma 3 270M's calls in decodes (docs/results.md: the 4-, 8- and 16-row verifies cost
# 1.35, 2.0 and 2.6 decodes; a draft level 0.08).
GEMMA_COSTS = StepCosts({4: 1.35, 8: 2.0, 16: 2.6}, 0.08, 1, decode_s=1.0)

# A request's acceptance per depth, drawn per request.
SCENARIOS: dict[str, Callable[[random.Random], float]] = {
    "zero": lambda rng: 0.0,  # a draft that agrees with nothing
    "low": lambda rng: rng.uniform(0.1, 0.35),  # where a decode is about as fast
    "mid": lambda rng: rng.uniform(0.35, 0.6),  # the shipped draft sampled (0.47-0.6)
    "high": lambda rng: rng.uniform(0.55, 0.8),  # the shipped draft greedy
    "mixed": lambda rng: rng.choice([0.15, 0.45, 0.6, 0.75]),  # request to request
}


def outcome(
    choice: Choice, accepted: int, c: StepCosts, behind: bool = False, catch_up: float = 0.0
) -> StepOutcome:
    """What running ``choice`` did: its draft accepted ``accepted`` of its tokens, after
    ``catch_up`` decode-times of catch-up over the prompt, and one more draft call where it
    was ``behind`` (decodes before it)."""
    if choice.decodes:
        return StepOutcome(0, 0, c.decode_s, target_s=c.decode_s, rows=1)
    cost = choice.shape.cost
    rows = next(w for w in WIDTHS if w >= cost.max_nodes + 1)
    calls = 1 + max(cost.levels, -(-cost.fed_nodes // c.step_width)) + behind
    draft_s = calls * c.draft_s + catch_up
    height = cost.max_height
    target_s = c.verify_s[rows]
    return StepOutcome(
        height, min(accepted, height), target_s + draft_s, height, None, target_s, rows,
        draft_s, calls,
    )  # fmt: skip


def accepted_tokens(rng: random.Random, rate: float, length: int) -> int:
    n = 0
    while n < length and rng.random() < rate:
        n += 1
    return n


def best_fixed(rate: float, lengths: range, c: StepCosts) -> float:
    """Expected tokens per decode-time of the best fixed chain at ``rate`` (1.0: a decode)."""
    best = 1.0
    for n in lengths:
        tokens = sum(rate**k for k in range(n + 1))
        best = max(best, tokens / c.predict(ChainShape(n).cost, WIDTHS))
    return best


def simulate(
    scenario: str,
    histories: int,
    requests: int,
    steps: int,
    seed: int,
    prices: StepCosts = GEMMA_COSTS,
    catch_up: float = 0.0,
    opening: int = 0,
) -> dict[str, Any]:
    """Each history: one dispatcher over ``requests`` requests of ``steps`` steps, its calls
    priced by ``prices``."""
    lengths = auto_chain_lengths(AUTO_MAX_CHAIN)
    speeds: list[float] = []
    captures: list[float] = []
    ways: Counter[str] = Counter()
    for h in range(histories):
        rng = random.Random(seed * 100_003 + h)
        policy = Dispatcher([ChainShape(n) for n in lengths], WIDTHS)
        policy.use_costs(prices)
        for _ in range(requests):
            rate = SCENARIOS[scenario](rng)
            policy.begin()
            tokens, seconds = 0, 0.0
            behind, drafted = False, 0
            for _ in range(steps):
                choice = policy.choose(None, 1 << 20)
                height = choice.shape.cost.max_height
                agreed = accepted_tokens(rng, rate, height)
                if not choice.decodes:
                    agreed = agreed if drafted >= opening else 0
                    drafted += 1
                # The request's first draft step catches the draft up over the prompt.
                owed = catch_up if not choice.decodes and drafted == 1 else 0.0
                step = outcome(choice, agreed, prices, behind, owed)
                behind = choice.decodes and catch_up > 0
                policy.observe(choice, step)
                ways[choice.shape.name] += 1
                tokens += step.emitted
                seconds += step.seconds
            speed = tokens / seconds
            speeds.append(speed)
            oracle = best_fixed(rate, lengths, prices)
            if oracle > 1.02:
                captures.append((speed - 1.0) / (oracle - 1.0))
    total = sum(ways.values())
    return {
        "speed_mean": statistics.mean(speeds),
        "speed_min": min(speeds),
        "requests": len(speeds),
        "below_0_95": sum(s < 0.95 for s in speeds),
        "capture_mean": statistics.mean(captures) if captures else None,
        "capture_requests": len(captures),
        "step_share": {k: v / total for k, v in ways.most_common()},
        "speeds": [round(s, 4) for s in speeds],
    }


def apply_overrides(pairs: tuple[str, ...]) -> dict[str, float]:
    """``NAME=VALUE`` for a constant the dispatcher's modules read at each use."""
    done: dict[str, float] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        modules = [m for m in (dispatcher, acceptance, costs) if hasattr(m, name)]
        if not name.startswith("AUTO_") or not modules or not value:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE, NAME a dispatcher constant")
        kind = type(getattr(modules[0], name))
        try:
            parsed = kind(value)
        except ValueError:
            raise click.BadParameter(f"{pair!r}: {name} takes a {kind.__name__}") from None
        for m in modules:
            setattr(m, name, parsed)
        done[name] = float(parsed)
    return done


@click.command()
@click.option("--scenarios", default=",".join(SCENARIOS), show_default=True)
@click.option("--histories", default=40, show_default=True, help="Dispatchers per scenario.")
@click.option("--requests", default=20, show_default=True, help="Requests per dispatcher.")
@click.option("--steps", default=128, show_default=True, help="Steps per request.")
@click.option("--seed", default=0, show_default=True)
@click.option("--set", "overrides", multiple=True, help="NAME=VALUE: a constant overridden.")
@click.option(
    "--verify-costs",
    default=",".join(str(GEMMA_COSTS.verify_s[w]) for w in WIDTHS),
    show_default=True,
    help="Each verify width's call in decodes, comma-separated in the order of the widths.",
)
@click.option("--draft-cost", default=GEMMA_COSTS.draft_s, show_default=True,
              type=click.FloatRange(0), help="A draft call in decodes.")  # fmt: skip
@click.option("--catch-up", default=0.0, show_default=True, type=click.FloatRange(0),
              help="The draft's catch-up over skipped positions, in decodes.")  # fmt: skip
@click.option("--opening", default=0, show_default=True, type=click.IntRange(0),
              help="A request's first draft steps rejected whatever its rate.")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
def main(
    scenarios: str,
    histories: int,
    requests: int,
    steps: int,
    seed: int,
    overrides: tuple[str, ...],
    verify_costs: str,
    draft_cost: float,
    catch_up: float,
    opening: int,
    json_out: Path | None,
) -> None:
    names = [s for s in scenarios.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        raise click.BadParameter(f"unknown scenario {unknown[0]!r}: one of {', '.join(SCENARIOS)}")
    try:
        verify = [float(v) for v in verify_costs.split(",")]
    except ValueError:
        verify = []
    if len(verify) != len(WIDTHS) or min(verify) <= 0:
        raise click.BadParameter(
            f"--verify-costs {verify_costs!r}: {len(WIDTHS)} positive numbers, one per width "
            f"({', '.join(map(str, WIDTHS))})"
        )
    prices = StepCosts(dict(zip(WIDTHS, verify, strict=True)), draft_cost, 1, decode_s=1.0)
    if json_out is not None and not json_out.parent.is_dir():
        raise click.BadParameter(f"no folder {json_out.parent} for --json")
    report: dict[str, Any] = {
        "overrides": apply_overrides(overrides),
        "settings": {
            "histories": histories,
            "requests": requests,
            "steps": steps,
            "seed": seed,
            "verify_costs": verify,
            "draft_cost": draft_cost,
            "catch_up": catch_up,
            "opening": opening,
        },
        "scenarios": {},
    }
    for name in names:
        r = simulate(name, histories, requests, steps, seed, prices, catch_up, opening)
        report["scenarios"][name] = r
        capture = "-" if r["capture_mean"] is None else f"{r['capture_mean']:.2f}"
        click.echo(
            f"{name:6s} speed {r['speed_mean']:.3f} (min {r['speed_min']:.3f}, "
            f"{r['below_0_95']}/{r['requests']} below 0.95)  capture {capture}"
        )
    if json_out is not None:
        json_out.write_text(json.dumps(report, separators=(",", ":")) + "\n")
        click.echo(f"wrote {json_out}")


if __name__ == "__main__":
    main()
