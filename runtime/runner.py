"""TextLLMRunner: tokenizer, prefill, stop handling, callbacks, stats and lifecycle.

Token generation after the first token is delegated to a ``TokenGenerator``; the runner is
the same object whether it decodes with the target alone or speculatively.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from etspec.contract import TARGET_RESET, TargetMetadata
from etspec.errors import EtspecError
from etspec.runtime.generator import GenerationContext, TextTokenGenerator, TokenGenerator
from etspec.runtime.prefill import prefill_target
from etspec.runtime.program import Program
from etspec.runtime.sampling import LogitsProcessor, Sampler, SamplingConfig
from etspec.runtime.stats import GenerationStats, peak_rss_bytes
from etspec.runtime.tokenizer import StreamDecoder, Tokenizer

#: Streaming callback: receives each batch of new token ids and the text they complete.
TokenCallback = Callable[[list[int], str], None]


class GenerationError(EtspecError):
    """A generation request the runner cannot serve (bad prompt, budget, batch)."""


@dataclass
class GenerationResult:
    token_ids: list[int]  # the new tokens (EOS included when it ended generation)
    text: str
    stop_reason: str  # "eos" | "max_new_tokens" | "callback"
    stats: GenerationStats
    logits: torch.Tensor | None = None  # [n, V] raw target logits per token, when recorded
    prompt_ids: list[int] = field(default_factory=list)
    # Tokens the final step offered and kept: offered > 1 means the stop fell in a window.
    last_offered: int = 0
    last_emission: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "token_ids": self.token_ids,
            "text": self.text,
            "stop_reason": self.stop_reason,
            "stats": self.stats.to_dict(),
        }


class _Sink:
    """Applies stop rules to what a generator emits and streams it to the callback."""

    def __init__(
        self,
        prompt: list[int],
        max_new_tokens: int,
        eos: set[int],
        decoder: StreamDecoder | None,
        callback: TokenCallback | None,
        record_logits: bool,
    ) -> None:
        self.history = list(prompt)
        self.new: list[int] = []
        self.max_new = max_new_tokens
        self.eos = eos
        self.decoder = decoder
        self.callback = callback
        self.record = record_logits
        self.logits: list[torch.Tensor] = []
        self.stop_reason = ""
        self.last_emission = 0  # tokens kept from the final emission
        self.last_offered = 0  # tokens the generator offered in it

    @property
    def remaining(self) -> int:
        return 0 if self.stop_reason else self.max_new - len(self.new)

    def emit(self, tokens: list[int], logits: torch.Tensor) -> bool:
        take = tokens[: self.remaining]
        for i, t in enumerate(take):
            if t in self.eos:
                take = take[: i + 1]
                self.stop_reason = "eos"
                break
        self.last_emission, self.last_offered = len(take), len(tokens)
        self.new.extend(take)
        self.history.extend(take)
        if self.record:
            self.logits.append(logits[: len(take)].clone())
        if self.callback is not None:
            piece = self.decoder.push(take) if self.decoder else ""
            if self.callback(take, piece) is False:
                self.stop_reason = self.stop_reason or "callback"
        if not self.stop_reason and len(self.new) >= self.max_new:
            self.stop_reason = "max_new_tokens"
        return not self.stop_reason


class TextLLMRunner:
    """Generates text from a target program, optionally through a speculative generator."""

    def __init__(
        self,
        target: Program,
        generator: TokenGenerator | None = None,
        tokenizer: Tokenizer | None = None,
        reference: bool = False,
    ) -> None:
        meta = target.metadata
        if not isinstance(meta, TargetMetadata):
            raise EtspecError("TextLLMRunner needs a target program")
        self.target = target
        self.meta = meta
        self.generator: TokenGenerator = generator or TextTokenGenerator()
        if tokenizer is None:
            data = target.tokenizer_json()
            tokenizer = Tokenizer(data) if data else None
        self.tokenizer = tokenizer
        self.reference = reference
        self._lock = threading.Lock()

    @classmethod
    def from_pte(
        cls,
        target: str | Path,
        draft: str | Path | None = None,
        *,
        tree: str = "auto",
        num_spec_tokens: int = 3,
        kv_strategy: str = "position-overwrite",
    ) -> TextLLMRunner:
        """Load a target ``.pte`` (and, for speculation, its EAGLE-3 draft ``.pte``).

        ``tree`` is ``chain`` (``num_spec_tokens`` long), ``static``, ``dynamic`` or
        ``auto`` (the budget dispatcher); ``RunnerSpec``/``TreeSettings`` take every option.
        """
        from etspec.runtime.loading import RunnerSpec, load_runners
        from etspec.runtime.speculative.dispatcher import TreeSettings

        spec = RunnerSpec(
            Path(target),
            Path(draft) if draft is not None else None,
            tree=TreeSettings(tree, num_spec_tokens),
            kv_strategy=kv_strategy,
        )
        base, speculative = load_runners(spec)
        return speculative or base

    def encode(self, prompt: str | Sequence[int] | torch.Tensor) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise GenerationError(
                    "this target artifact carries no tokenizer; pass token ids instead "
                    "(--prompt-ids 1,2,3)"
                )
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, torch.Tensor):
            if prompt.dim() == 2 and prompt.shape[0] != 1:
                raise GenerationError(
                    f"batch size {prompt.shape[0]} is not supported: etspec generates one "
                    "sequence at a time; call generate once per prompt"
                )
            prompt = prompt.reshape(-1).tolist()
        ids = list(prompt)
        if ids and isinstance(ids[0], (list, tuple)):
            if len(ids) != 1:
                raise GenerationError(
                    f"batch size {len(ids)} is not supported: etspec generates one sequence "
                    "at a time; call generate once per prompt"
                )
            ids = list(ids[0])
        vocab = self.meta.vocab_size
        bad = [t for t in ids if not isinstance(t, int) or not 0 <= t < vocab]
        if bad:
            raise GenerationError(
                f"prompt token id {bad[0]} is outside the vocabulary [0, {vocab})"
            )
        return ids

    def generate(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        max_new_tokens: int = 128,
        sampling: SamplingConfig | None = None,
        *,
        processors: Sequence[LogitsProcessor] = (),
        callback: TokenCallback | None = None,
        ignore_eos: bool = False,
        record_logits: bool = False,
        trace: bool = False,
    ) -> GenerationResult:
        """Generate up to ``max_new_tokens`` tokens after ``prompt`` (text or token ids).

        ``trace`` records every speculative step in ``stats.steps`` (shape, accepted
        length, seconds and stage seconds)."""
        if not self._lock.acquire(blocking=False):
            raise GenerationError(
                "this runner is already generating in another thread; use one runner per thread"
            )
        try:
            return self._generate(
                prompt,
                max_new_tokens,
                sampling or SamplingConfig(),
                processors,
                callback,
                ignore_eos,
                record_logits,
                trace,
            )
        finally:
            self._lock.release()

    def _generate(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        max_new_tokens: int,
        sampling: SamplingConfig,
        processors: Sequence[LogitsProcessor],
        callback: TokenCallback | None,
        ignore_eos: bool,
        record_logits: bool,
        trace: bool,
    ) -> GenerationResult:
        # Everything a caller can get wrong is checked before any state changes.
        ids = self.encode(prompt)
        if not ids:
            raise GenerationError("empty prompt: give at least one token")
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise GenerationError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        limit = self.meta.max_context
        if len(ids) >= limit:
            raise GenerationError(
                f"prompt of {len(ids)} tokens does not fit the context of {limit} (it needs "
                "room for at least one new token); shorten it or export with a larger --max-seq"
            )
        if len(ids) + max_new_tokens > limit:
            raise GenerationError(
                f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} exceeds the "
                f"context of {limit}; lower max_new_tokens to at most {limit - len(ids)} or "
                "export with a larger --max-seq"
            )
        sampler = Sampler(sampling, processors)
        self.generator.check(sampler)

        stats = GenerationStats(prompt_tokens=len(ids))
        eos = set() if ignore_eos else set(self.meta.eos_token_ids)
        decoder = StreamDecoder(self.tokenizer) if self.tokenizer else None
        sink = _Sink(ids, max_new_tokens, eos, decoder, callback, record_logits)
        t0 = time.perf_counter()
        self.reset()
        with stats.stage("prefill"):
            pre = prefill_target(self.target, torch.tensor(ids, dtype=torch.long))
        stats.prefill_calls += -(-len(ids) // self.meta.prefill_chunk)
        first = sampler.pick(pre.logits, ids)
        ctx = GenerationContext(self.target, sampler, stats, ids, pre, first, self.reference)
        if sink.emit([first], pre.logits):
            stats.ttft_s = time.perf_counter() - t0
            if trace:
                stats.start_trace()
            self.generator.generate(ctx, sink)
        else:
            stats.ttft_s = time.perf_counter() - t0
        stats.total_s = time.perf_counter() - t0
        stats.generated_tokens = len(sink.new)
        stats.memory = self.memory()
        if callback is not None and decoder is not None:
            tail = decoder.flush()
            if tail:
                callback([], tail)
        text = self.tokenizer.decode(sink.new) if self.tokenizer else ""
        return GenerationResult(
            token_ids=sink.new,
            text=text,
            stop_reason=sink.stop_reason,
            stats=stats,
            logits=torch.cat(sink.logits) if record_logits else None,
            prompt_ids=ids,
            last_offered=sink.last_offered,
            last_emission=sink.last_emission,
        )

    def reset(self) -> None:
        """Clear every cache: the target's and the generator's."""
        self.target.run(TARGET_RESET)
        self.generator.reset()

    def memory(self) -> dict[str, int]:
        mem = {
            "target_weights_bytes": self.target.weights_bytes(),
            "target_kv_bytes": self.meta.kv_cache_bytes,
        }
        mem.update(self.generator.memory())
        mem["peak_rss_bytes"] = peak_rss_bytes()
        return mem
