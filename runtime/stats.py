"""Structured generation stats: calls, acceptance, per-stage time, memory.

Field names and their order are ``contract.STATS_FIELDS``, the JSON shared with ``etspec
generate --json``, the benchmark harness and the C++ runner. ``tpc`` (tokens per target
call) counts every token one verify emits, accepted drafts plus the correction or bonus
token, so a draft that is never right still gives 1.0; ``accept_length`` (the seeds'
accept_L) counts accepted draft tokens only.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from etspec.contract import NO_DRAFT_SHAPE, STAGES, STATS_FIELDS


def current_rss_bytes() -> int:
    """Resident set size now (Linux /proc); the peak where /proc is absent."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, left in the KV by the last request (reused)
    generated_tokens: int = 0
    prefill_calls: int = 0
    decode_calls: int = 0
    verify_calls: int = 0
    draft_calls: int = 0
    commit_calls: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    # accept_pos[i]: verifies whose draft position i+1 was accepted; proposed_pos[i]: verifies
    # that proposed a token at draft position i+1, i.e. a tree at least i+1 levels deep
    # (their ratio is the acceptance curve).
    accept_pos: list[int] = field(default_factory=list)
    proposed_pos: list[int] = field(default_factory=list)
    # Verify steps per tree shape (what ``--tree auto`` chose; ``lookup``: prompt lookup's
    # offers, ``none``: a decode), and their drafted and accepted tokens: which drafter
    # produced which steps and tokens.
    shape_steps: dict[str, int] = field(default_factory=dict)
    shape_drafted: dict[str, int] = field(default_factory=dict)
    shape_accepted: dict[str, int] = field(default_factory=dict)
    stage_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    ttft_s: float = 0.0
    total_s: float = 0.0
    memory: dict[str, int] = field(default_factory=dict)
    # One record per verify step once ``start_trace`` ran; None otherwise, so an untraced
    # step pays one comparison.
    steps: list[dict[str, Any]] | None = None
    _trace_t: float = field(default=0.0, repr=False)
    _trace_stage: dict[str, float] = field(default_factory=dict, repr=False)

    def start_trace(self) -> None:
        """Record every following verify step: its shape, acceptance, seconds and stage
        seconds since the previous step (the first step: since this call)."""
        self.steps = []
        self._trace_t = time.perf_counter()
        self._trace_stage = dict(self.stage_s)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stage_s[name] += time.perf_counter() - t0

    def record_verify(
        self, proposed: int, accepted: int, height: int | None = None, shape: str = ""
    ) -> None:
        """One verify call that checked ``proposed`` draft tokens in a tree ``height``
        levels deep (a chain: ``proposed``) and accepted ``accepted`` of them."""
        height = proposed if height is None else height
        self.verify_calls += 1
        self.drafted_tokens += proposed
        self.accepted_tokens += accepted
        if shape:
            self.shape_steps[shape] = self.shape_steps.get(shape, 0) + 1
            self.shape_drafted[shape] = self.shape_drafted.get(shape, 0) + proposed
            self.shape_accepted[shape] = self.shape_accepted.get(shape, 0) + accepted
        while len(self.proposed_pos) < height:
            self.proposed_pos.append(0)
            self.accept_pos.append(0)
        for i in range(height):
            self.proposed_pos[i] += 1
        for i in range(accepted):
            self.accept_pos[i] += 1
        if self.steps is not None:
            self._trace(shape, proposed, height, accepted)

    def record_decode(self) -> None:
        """One step of a speculative generator that proposed nothing (a plain decode)."""
        self.shape_steps[NO_DRAFT_SHAPE] = self.shape_steps.get(NO_DRAFT_SHAPE, 0) + 1
        if self.steps is not None:
            self._trace(NO_DRAFT_SHAPE, 0, 0, 0)

    def _trace(self, shape: str, proposed: int, height: int, accepted: int) -> None:
        now, last = time.perf_counter(), self._trace_stage
        self.steps.append(  # type: ignore[union-attr]
            {
                "shape": shape,
                "proposed": proposed,
                "height": height,
                "accepted": accepted,
                "seconds": now - self._trace_t,
                "stage_s": {k: v - last[k] for k, v in self.stage_s.items() if v != last[k]},
            }
        )
        self._trace_t, self._trace_stage = now, dict(self.stage_s)

    @property
    def rejected_tokens(self) -> int:
        return self.drafted_tokens - self.accepted_tokens

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def accept_length(self) -> float:
        return self.accepted_tokens / self.verify_calls if self.verify_calls else 0.0

    @property
    def tpc(self) -> float:
        return self.accept_length + 1.0 if self.verify_calls else 0.0

    @property
    def decode_s(self) -> float:
        """Time after the first token (what tokens/s and TPOT measure)."""
        return max(self.total_s - self.ttft_s, 0.0)

    @property
    def tokens_per_s(self) -> float:
        after_first = self.generated_tokens - 1
        return after_first / self.decode_s if after_first > 0 and self.decode_s > 0 else 0.0

    @property
    def tpot_s(self) -> float:
        after_first = self.generated_tokens - 1
        return self.decode_s / after_first if after_first > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The stats as JSON, field by field in ``contract.STATS_FIELDS``'s order (the C++
        runner writes the same list); ``steps`` follows when traced."""
        out: dict[str, Any] = {}
        for name, _ in STATS_FIELDS:
            value = getattr(self, name)
            out[name] = value.copy() if isinstance(value, (list, dict)) else value
        if self.steps is not None:
            out["steps"] = list(self.steps)
        return out
