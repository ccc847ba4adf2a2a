"""The greedy-equivalence suite: speculative output must equal target-only output.

Each prompt runs twice on the same artifacts, target-only and speculative, greedy. Outputs
must be identical token for token. A divergence passes only as a near-tie: the
target-only logits at the diverging step have a top-2 gap below ``TIE_GAP`` (verify and
decode are different kernels, so a near-tie may flip). "Identical" counts bit-identical
outputs only; near-ties are counted and reported apart, each with its gap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from etspec.errors import EtspecError
from etspec.runtime.runner import TextLLMRunner
from etspec.tools.prompts import jsonl_prompts

TIE_GAP = 1e-4


@dataclass
class PromptResult:
    prompt_id: int
    passed: bool
    tie: bool
    diverge_at: int | None
    target_ids: list[int]
    speculative_ids: list[int]
    gap: float | None = None
    tpc: float = 0.0


@dataclass
class ValidationReport:
    results: list[PromptResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def ties(self) -> int:
        return sum(r.tie for r in self.results)

    @property
    def identical(self) -> int:
        """Bit-identical outputs (near-ties not among them)."""
        return sum(r.diverge_at is None for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "prompts": len(self.results),
            "identical": self.identical,
            "near_ties": self.ties,
            "failures": sum(not r.passed for r in self.results),
            "results": [r.__dict__ for r in self.results],
        }


def read_prompts(path: str | Path) -> list[str | list[int]]:
    """A prompts file (``tools/prompts.jsonl_prompts``) as single-turn prompts."""
    prompts = jsonl_prompts(path)
    if any(p.followups for p in prompts):
        raise EtspecError(f"{path}: validate runs single prompts; drop the later 'turns'")
    return [list(p.text) if isinstance(p.text, tuple) else p.text for p in prompts]


def compare(
    prompt_id: int, target: list[int], speculative: list[int], logits: torch.Tensor
) -> PromptResult:
    """Judge one prompt; ``logits`` are the target-only run's raw logits per emitted token."""
    diverge = next(
        (i for i, (a, b) in enumerate(zip(target, speculative, strict=False)) if a != b), None
    )
    if diverge is None and len(target) != len(speculative):
        diverge = min(len(target), len(speculative))
    if diverge is None:
        return PromptResult(prompt_id, True, False, None, target, speculative)
    gap = None
    if diverge < logits.shape[0]:
        top2 = logits[diverge].float().topk(2).values
        gap = float(top2[0] - top2[1])
    tie = gap is not None and gap < TIE_GAP
    return PromptResult(prompt_id, tie, tie, diverge, target, speculative, gap)


def validate(
    target_only: TextLLMRunner,
    speculative: TextLLMRunner,
    prompts: Iterable[str | list[int]],
    max_new_tokens: int = 32,
    ignore_eos: bool = False,
) -> Iterable[PromptResult]:
    """Yield one judged result per prompt (greedy)."""
    for i, prompt in enumerate(prompts):
        budget = _budget(target_only, prompt, max_new_tokens)
        ref = target_only.generate(prompt, budget, ignore_eos=ignore_eos, record_logits=True)
        spec = speculative.generate(prompt, budget, ignore_eos=ignore_eos)
        assert ref.logits is not None
        result = compare(i, ref.token_ids, spec.token_ids, ref.logits)
        result.tpc = spec.stats.tpc
        yield result


def _budget(runner: TextLLMRunner, prompt: str | list[int], wanted: int) -> int:
    room = runner.meta.max_context - len(runner.encode(prompt))
    return max(1, min(wanted, room))
