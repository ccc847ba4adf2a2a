"""The greedy-equivalence suite: speculative output must equal target-only output.

Each prompt runs twice on the same artifacts, target-only and speculative, greedy. Outputs
must be identical token for token. A divergence passes only as a numerical tie: the
target-only logits at the diverging step have a top-2 gap below ``TIE_GAP`` (verify and
decode are different kernels, so a near-tie may flip); ties are counted and reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from etspec.errors import EtspecError
from etspec.runtime.runner import TextLLMRunner

TIE_GAP = 1e-4

#: Built-in prompts for artifacts with a tokenizer (code and prose, short and long).
TEXT_PROMPTS = [
    "def fibonacci(n):",
    "import os\nimport sys\n\n",
    "class Stack:\n    def __init__(self):",
    "def is_prime(n: int) -> bool:\n    ",
    "for i in range(10):\n    print(",
    '"""Utilities for parsing command line arguments."""\n',
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n",
    "with open(path) as f:\n    for line in f:",
    "The quick brown fox",
    "Once upon a time,",
    "try:\n    import json\nexcept ImportError:\n",
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):",
    "x = [i * i for i in range(",
    "if __name__ == '__main__':\n",
    "# Compute the greatest common divisor\ndef gcd(a, b):",
    "async def fetch(url):\n",
    "return {k: v for k, v in",
    "@dataclass\nclass Point:\n    x: float\n",
    "while True:\n    line = input()\n",
    "def binary_search(arr, target):\n    lo, hi = 0, len(arr) - 1\n",
]


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "prompts": len(self.results),
            "failures": sum(not r.passed for r in self.results),
            "ties": self.ties,
            "results": [r.__dict__ for r in self.results],
        }


def default_prompts(runner: TextLLMRunner, count: int = 20) -> list[str | list[int]]:
    """Text prompts when the artifact has a tokenizer, else seeded random ids of many lengths
    (some longer than a prefill chunk)."""
    if runner.tokenizer is not None:
        return list(TEXT_PROMPTS[:count])
    meta = runner.meta
    gen = torch.Generator().manual_seed(1234)
    longest = max(2, min(3 * meta.prefill_chunk, meta.max_context // 2))
    out: list[str | list[int]] = []
    for i in range(count):
        n = 1 + (i * 7) % longest
        out.append(torch.randint(0, meta.vocab_size, (n,), generator=gen).tolist())
    return out


def read_prompts(path: str | Path) -> list[str | list[int]]:
    """JSONL with ``prompt`` (text) or ``prompt_ids`` (list of ints) on each line."""
    prompts: list[str | list[int]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise EtspecError(f"cannot read prompts file {path}: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise EtspecError(f"{path}:{n}: not valid JSON") from None
        if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
            prompts.append(obj["prompt"])
        elif isinstance(obj, dict) and isinstance(obj.get("prompt_ids"), list):
            prompts.append([int(t) for t in obj["prompt_ids"]])
        else:
            raise EtspecError(f"{path}:{n}: expected an object with 'prompt' or 'prompt_ids'")
    if not prompts:
        raise EtspecError(f"{path}: no prompts")
    return prompts


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
