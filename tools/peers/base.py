"""What every outside peer shares: it borrows etspec's target-only runner of the same model
(``base``) for prompt ids, context and EOS ids, so every system sees the same tokens and stops
alike, and answers the bench harness's ``generate`` with a ``GenerationResult``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from etspec.contract import TargetMetadata
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.stats import GenerationStats, peak_rss_bytes


class OutsidePeer(ABC):
    """A system the benchmark compares etspec with (transformers, llama.cpp, the C++ runner).

    ``threads`` is what the summary reports of it (None: not the peer's to choose)."""

    threads: int | None = None

    def __init__(self, base: TextLLMRunner) -> None:
        self.base = base
        self.meta: TargetMetadata = base.meta

    def encode(self, prompt: str | Sequence[int]) -> list[int]:
        return self.base.encode(prompt)

    def describe(self) -> dict[str, Any]:
        """A peer has no etspec generator: reports name its class."""
        return {"generator": type(self).__name__, "tree": None, "kv_strategy": None,
                "target": self.meta.constant_methods()}  # fmt: skip

    def close(self) -> None:  # noqa: B027  # optional hook
        """Free what the peer holds outside Python's reach (a native context)."""

    def generate(
        self,
        prompt: str | Sequence[int],
        max_new_tokens: int = 128,
        sampling: SamplingConfig | None = None,
        *,
        trace: bool = False,
        ignore_eos: bool = False,
    ) -> GenerationResult:
        """One generation from etspec's prompt ids (``trace`` is accepted for the harness's
        sake: a peer reports no speculative steps)."""
        ids = self.encode(prompt)
        return self.run(ids, max_new_tokens, sampling or SamplingConfig(), ignore_eos)

    @abstractmethod
    def run(
        self,
        ids: list[int],
        max_new_tokens: int,
        sampling: SamplingConfig,
        ignore_eos: bool = False,
    ) -> GenerationResult:
        """Generate after ``ids`` (past EOS with ``ignore_eos``, to ``max_new_tokens``)."""

    def result(self, new: list[int], stats: GenerationStats) -> GenerationResult:
        """The result of new tokens ``new``: text by the target's tokenizer, stop reason by
        its EOS ids, the process's peak memory in the stats."""
        stats.generated_tokens = len(new)
        stats.memory = {"peak_rss_bytes": peak_rss_bytes()}
        stop = "eos" if new and new[-1] in self.meta.eos_token_ids else "max_new_tokens"
        text = self.base.tokenizer.decode(new) if self.base.tokenizer is not None else ""
        return GenerationResult(token_ids=new, text=text, stop_reason=stop, stats=stats)
