"""Which drafter produced a run's steps and tokens.

A speculative step is prompt lookup's offer (``lookup``), the draft model's shape (EAGLE-3
or the Gemma 4 assistant: ``model``) or a decode that drafts nothing (``none``); the stats
count steps, drafted and accepted tokens per shape (``shape_steps``, ``shape_drafted``,
``shape_accepted``), and a step emits its accepted tokens and one more. A speedup on text
that repeats itself is mostly prompt lookup's; these counts say how much.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from etspec.contract import LOOKUP_LABEL, NO_DRAFT_SHAPE, PROMPT_LOOKUP_METHOD

LOOKUP, MODEL, NONE = "lookup", "model", "none"
DRAFTERS = (LOOKUP, MODEL, NONE)
FIELDS = ("steps", "drafted", "accepted", "emitted")


def drafter_of(shape: str) -> str:
    """The drafter behind a ``shape_steps`` label."""
    if shape == LOOKUP_LABEL:
        return LOOKUP
    return NONE if shape == NO_DRAFT_SHAPE else MODEL


def drafters(record: dict[str, Any], method: str | None = None) -> dict[str, dict[str, int]]:
    """Per drafter that ran a step of ``record`` (a generation's stats) under draft
    ``method``: its steps, drafted, accepted and emitted tokens. Prompt lookup alone grows
    its shapes itself (its steps are labelled by shape, not ``lookup``)."""
    drafted = record.get("shape_drafted") or {}
    accepted = record.get("shape_accepted") or {}
    alone = method == PROMPT_LOOKUP_METHOD
    out: dict[str, dict[str, int]] = {}
    for shape, steps in (record.get("shape_steps") or {}).items():
        who = drafter_of(shape)
        d = out.setdefault(LOOKUP if alone and who == MODEL else who, dict.fromkeys(FIELDS, 0))
        d["steps"] += steps
        d["drafted"] += drafted.get(shape, 0)
        d["accepted"] += accepted.get(shape, 0)
        d["emitted"] += accepted.get(shape, 0) + steps
    return out


def pooled(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``drafters`` summed over records, with each drafter's share of the steps and of the
    emitted tokens (``step_share``, ``token_share``)."""
    out: dict[str, dict[str, float]] = {}
    for r in records:
        for who, d in (r.get("drafters") or drafters(r)).items():
            mine = out.setdefault(who, dict.fromkeys(FIELDS, 0))
            for k in FIELDS:
                mine[k] += d[k]
    steps = sum(d["steps"] for d in out.values())
    tokens = sum(d["emitted"] for d in out.values())
    for d in out.values():
        d["step_share"] = d["steps"] / steps if steps else 0.0
        d["token_share"] = d["emitted"] / tokens if tokens else 0.0
    return {who: out[who] for who in DRAFTERS if who in out}


def shares(summary: dict[str, Any]) -> str:
    """``lookup 45% / model 50% / none 5%`` of the steps, for a printed table."""
    pool = summary.get("drafters") or {}
    return " / ".join(f"{who} {d['step_share']:.0%}" for who, d in pool.items()) or "-"
