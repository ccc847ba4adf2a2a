"""TextLLMRunner: tokenizer, prefill, stop handling, callbacks, stats and lifecycle.

Token generation after the first token is delegated to a ``TokenGenerator``; the runner is
the same object whether it decodes with the target alone or speculatively. ``load_runners``
makes them from a ``RunnerSpec``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from etspec.contract import (
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_KV_STRATEGY,
    TARGET_KV_BYTES,
    TARGET_RESET,
    TARGET_WEIGHTS_BYTES,
    TargetMetadata,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.chat import ChatTemplate, chat_ids
from etspec.runtime.generator import GenerationContext, TextTokenGenerator, TokenGenerator
from etspec.runtime.loading import load_programs, method_of, speculates
from etspec.runtime.prefill import prefill_prompt
from etspec.runtime.program import Program
from etspec.runtime.prompt import is_count, prompt_ids
from etspec.runtime.results import (
    GenerationConfig,
    GenerationError,
    GenerationResult,
    TokenCallback,
    resolve_max_new_tokens,
)
from etspec.runtime.sampling import LogitsProcessor, Sampler, SamplingConfig
from etspec.runtime.sink import StreamingSink, with_text_callback
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.generator import SpeculativeTokenGenerator
from etspec.runtime.speculative.settings import tree_policy
from etspec.runtime.speculative.shapes import TreePolicy
from etspec.runtime.stats import GenerationStats, peak_rss_bytes
from etspec.runtime.threads import torch_single_threaded
from etspec.runtime.tokenizer import StreamDecoder, Tokenizer

__all__ = ["GenerationConfig", "GenerationError", "GenerationResult", "TextLLMRunner"]


@dataclass
class _Request:
    """A request's options besides the prompt, the budget and the sampling."""

    processors: Sequence[LogitsProcessor]
    callback: TokenCallback | None
    ignore_eos: bool
    record_logits: bool
    trace: bool
    reuse_prefix: bool


class TextLLMRunner:
    """Generates text from a target program, optionally through a speculative generator."""

    def __init__(
        self,
        target: Program,
        generator: TokenGenerator | None = None,
        tokenizer: Tokenizer | None = None,
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
        chat = target.chat_template()
        self.chat_template = ChatTemplate.from_json(chat) if chat is not None else None
        self._stop = threading.Event()
        # Runners built over one load share its programs (and their caches): a generation
        # holds the lock of every program it runs, so a second runner over the same load is
        # refused while one generates. Ordered by id, so two runners never wait on each other.
        programs = {id(p): p for p in (target, *self.generator.programs())}
        self._locks = [programs[k].lock for k in sorted(programs)]
        # Programs that run in ExecuTorch leave torch only host work (runtime/threads.py).
        self._pte_only = not any(p.reference for p in programs.values())

    @classmethod
    def from_pte(
        cls,
        target: str | Path,
        draft: str | Path | None = None,
        *,
        tree: str = "auto",
        num_spec_tokens: int = DEFAULT_CHAIN_LENGTH,
        kv_strategy: str = DEFAULT_KV_STRATEGY,
        num_speculative_tokens: int | None = None,
    ) -> TextLLMRunner:
        """Load a target ``.pte`` (and, for speculation, its EAGLE-3 draft ``.pte``).

        ``tree`` is ``chain`` (``num_spec_tokens`` long; vLLM's ``num_speculative_tokens``
        is accepted too), ``static``, ``dynamic`` or ``auto`` (the budget dispatcher);
        ``RunnerSpec``/``TreeSettings`` take every option.
        """
        if num_speculative_tokens is not None:
            num_spec_tokens = num_speculative_tokens
        for name, path in (("target", target), ("draft", draft)):
            if not isinstance(path, str | os.PathLike) and (name == "target" or path is not None):
                raise GenerationError(
                    f"{name} must be the path of a {name} .pte, got {type(path).__name__}"
                )
        if not is_count(num_spec_tokens):
            raise GenerationError(message("chain_length", value=repr(num_spec_tokens)))
        if not isinstance(tree, str):
            raise GenerationError(f"tree must be a mode name (str), got {type(tree).__name__}")
        spec = RunnerSpec(
            Path(target),
            Path(draft) if draft is not None else None,
            tree=TreeSettings(tree, num_spec_tokens),
            kv_strategy=kv_strategy,
        )
        base, speculative = load_runners(spec)
        return speculative or base

    def encode(self, prompt: str | Sequence[int] | torch.Tensor) -> list[int]:
        """``prompt`` as token ids (``prompt.prompt_ids``: text through the artifact's
        tokenizer; ids checked against the vocabulary)."""
        return prompt_ids(prompt, self.tokenizer, self.meta.vocab_size)

    def generate(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        max_new_tokens: int | GenerationConfig | None = None,
        sampling: SamplingConfig | Callable[[str], None] | None = None,
        stats_callback: Callable[[GenerationStats], None] | None = None,
        *,
        config: GenerationConfig | None = None,
        token_callback: Callable[[str], None] | None = None,
        processors: Sequence[LogitsProcessor] = (),
        callback: TokenCallback | None = None,
        ignore_eos: bool = False,
        record_logits: bool = False,
        trace: bool = False,
        reuse_prefix: bool = False,
    ) -> GenerationResult:
        """Generate up to ``max_new_tokens`` (default 128) tokens after ``prompt`` (text or
        token ids), greedy unless ``sampling`` says otherwise.

        ``callback(ids, text)`` streams each batch of new ids with the text they complete;
        returning False stops generation, as does ``stop()`` from another thread. ``trace``
        records every speculative step in ``stats.steps`` (shape, accepted length, seconds
        and stage seconds). ``reuse_prefix`` prefills only what follows the prompt's common
        prefix with the tokens the KV cache holds from the last request (``chat`` does).

        ExecuTorch's ``TextLLMRunner.generate(prompt, config, token_callback,
        stats_callback)`` works too, by keyword or in that order: ``config`` is a
        ``GenerationConfig`` (ours or ExecuTorch's), ``token_callback(text)`` gets each
        text piece and ``stats_callback(stats)`` the ``GenerationStats`` at the end."""
        if max_new_tokens is not None and hasattr(max_new_tokens, "max_new_tokens"):
            config, max_new_tokens = max_new_tokens, None  # ExecuTorch's positional config
        if max_new_tokens is not None and not is_count(max_new_tokens):
            raise GenerationError(message("max_new_tokens_low", value=repr(max_new_tokens)))
        if (
            sampling is not None
            and not callable(sampling)
            and not isinstance(sampling, SamplingConfig)
        ):
            raise GenerationError(
                f"sampling must be a SamplingConfig, got {type(sampling).__name__}"
            )
        if callable(sampling):
            token_callback, sampling = sampling, None  # ExecuTorch's positional callback
        if config is not None and (sampling is not None or max_new_tokens is not None):
            raise GenerationError("give a GenerationConfig or max_new_tokens/sampling, not both")
        request = _Request(processors, callback, ignore_eos, record_logits, trace, reuse_prefix)
        if config is not None:
            return self._generate_with_config(
                prompt, config, token_callback, stats_callback, request
            )
        if token_callback is not None:
            request.callback = with_text_callback(callback, token_callback)
        result = self._locked_generate(
            prompt,
            128 if max_new_tokens is None else max_new_tokens,
            sampling or SamplingConfig(),
            request,
        )
        if stats_callback is not None:
            stats_callback(result.stats)
        return result

    def _generate_with_config(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        config: Any,
        token_callback: Callable[[str], None] | None,
        stats_callback: Callable[[GenerationStats], None] | None,
        request: _Request,
    ) -> GenerationResult:
        """``generate`` driven by an ExecuTorch-style ``GenerationConfig``."""
        if getattr(config, "num_bos", 0) or getattr(config, "num_eos", 0):
            raise GenerationError(
                "GenerationConfig num_bos/num_eos must be 0: etspec adds the special tokens "
                "the target's tokenizer.json declares"
            )
        ids = self.encode(prompt)
        budget = resolve_max_new_tokens(config, self.meta.max_context, len(ids))
        if budget < 1:
            raise GenerationError(
                f"GenerationConfig leaves no room for new tokens after a {len(ids)}-token "
                f"prompt (seq_len {config.seq_len}, max_new_tokens {config.max_new_tokens}, "
                f"context {self.meta.max_context}); raise seq_len or shorten the prompt"
            )
        streamed = token_callback if not getattr(config, "warming", False) else None
        if streamed is not None and getattr(config, "echo", False) and isinstance(prompt, str):
            streamed(prompt)
        if streamed is not None:
            request.callback = with_text_callback(request.callback, streamed)
        sampling = SamplingConfig(temperature=float(config.temperature))
        result = self._locked_generate(ids, budget, sampling, request)
        if stats_callback is not None:
            stats_callback(result.stats)
        return result

    def chat(self, messages: Sequence[Mapping[str, Any]], *a: Any, **kw: Any) -> GenerationResult:
        """``generate`` (same arguments) after ``messages`` (``[{"role": "user", "content":
        ...}, ...]``) rendered by the target's chat template, up to the assistant's turn.
        The turns the last request left in the KV cache are not prefilled again."""
        ids = chat_ids(self.chat_template, self.tokenizer, messages, self.meta.vocab_size)
        return self.generate(ids, *a, **{"reuse_prefix": True, **kw})

    def stop(self) -> None:
        """Ask a running ``generate`` (in another thread, or a callback) to stop after the
        tokens of its current step; its result then has ``stop_reason == "stop"``."""
        self._stop.set()

    def get_vocab_size(self) -> int:
        """The target's vocabulary size (ExecuTorch's ``TextLLMRunner`` name)."""
        return self.meta.vocab_size

    def _locked_generate(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        max_new_tokens: int,
        sampling: SamplingConfig,
        request: _Request,
    ) -> GenerationResult:
        with self._holding("generate"), torch_single_threaded(self._pte_only):
            self._stop.clear()
            return self._generate(prompt, max_new_tokens, sampling, request)

    @contextlib.contextmanager
    def _holding(self, what: str) -> Iterator[None]:
        """Hold the lock of every program this runner runs, or refuse at once: a second
        thread's generate or reset must never touch caches a running generation uses."""
        held = []
        try:
            for lock in self._locks:
                if not lock.acquire(blocking=False):
                    raise GenerationError(
                        f"cannot {what}: this runner, or another runner over the same loaded "
                        "programs, is generating in another thread; give each thread its own "
                        "load (TextLLMRunner.from_pte or load_runners)"
                    )
                held.append(lock)
            yield
        finally:
            for h in reversed(held):
                h.release()

    def _generate(
        self,
        prompt: str | Sequence[int] | torch.Tensor,
        max_new_tokens: int,
        sampling: SamplingConfig,
        request: _Request,
    ) -> GenerationResult:
        # Everything a caller can get wrong is checked before any state changes.
        ids = self.encode(prompt)
        if not ids:
            raise GenerationError(message("empty_prompt"))
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise GenerationError(message("max_new_tokens_low", value=max_new_tokens))
        limit = self.meta.max_context
        if len(ids) >= limit:
            raise GenerationError(message("prompt_fills_context", tokens=len(ids), limit=limit))
        if len(ids) + max_new_tokens > limit:
            raise GenerationError(
                message(
                    "prompt_exceeds_context",
                    tokens=len(ids),
                    max_new=max_new_tokens,
                    limit=limit,
                    room=limit - len(ids),
                )
            )
        sampler = Sampler(sampling, request.processors)
        self.generator.check(sampler)

        stats = GenerationStats(prompt_tokens=len(ids))
        eos = set() if request.ignore_eos else set(self.meta.eos_token_ids)
        decoder = StreamDecoder(self.tokenizer) if self.tokenizer else None
        callback, record_logits = request.callback, request.record_logits
        sink = StreamingSink(ids, max_new_tokens, eos, decoder, callback, record_logits, self._stop)
        t0 = time.perf_counter()
        # The target's caches are not zeroed per request (PteProgram.load zeroes them once):
        # a request writes every slot it attends before reading it and masks the rest, and
        # zeroing costs what --max-seq allows, not what the request uses.
        self.generator.reset()
        with stats.stage("prefill"):
            pre, start = prefill_prompt(
                self.target, ids, request.reuse_prefix, self.generator.needs_hidden
            )
        stats.cached_tokens = start
        stats.prefill_calls += -(-(len(ids) - start) // self.meta.prefill_chunk)
        first = sampler.pick(pre.logits, ids)
        ctx = GenerationContext(self.target, sampler, stats, ids, pre, first)
        committed = len(ids)
        if sink.emit([first], pre.logits):
            stats.ttft_s = time.perf_counter() - t0
            if request.trace:
                stats.start_trace()
            committed = self.generator.generate(ctx, sink)
        else:
            stats.ttft_s = time.perf_counter() - t0
        self.target.held.hold(sink.history[:committed])
        stats.total_s = time.perf_counter() - t0
        stats.generated_tokens = len(sink.new)
        stats.memory = self.memory()
        text = self.tokenizer.decode(sink.new) if self.tokenizer else ""
        if callback is not None and decoder is not None:
            tail = decoder.flush(text)
            if tail:
                callback([], tail)
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

    def describe(self) -> dict[str, Any]:
        """What this runner is, for reports: its generator (``TokenGenerator.describe``)
        and the target artifact's metadata."""
        return {**self.generator.describe(), "target": self.meta.constant_methods()}

    def reset(self) -> None:
        """Clear every cache: the target's and the generator's. Refused (GenerationError)
        while this runner, or another over the same load, generates in another thread."""
        with self._holding("reset"):
            self.target.run(TARGET_RESET)
            self.generator.reset()

    def memory(self) -> dict[str, int]:
        mem = {
            TARGET_WEIGHTS_BYTES: self.target.weights_bytes(),
            TARGET_KV_BYTES: self.meta.kv_cache_bytes,
        }
        mem.update(self.generator.memory())
        mem["peak_rss_bytes"] = peak_rss_bytes()
        return mem


def load_runners(spec: RunnerSpec) -> tuple[TextLLMRunner, TextLLMRunner | None]:
    """(target-only runner, speculative runner or None); both share one target program."""
    target, draft = load_programs(spec)
    base = TextLLMRunner(target)
    if not speculates(spec):
        return base, None
    return base, speculative_runner(spec, base, draft, spec.tree)


def speculative_runner(
    spec: RunnerSpec,
    base: TextLLMRunner,
    draft: Program | None,
    tree: TreeSettings | TreePolicy,
) -> TextLLMRunner:
    """A speculative runner over ``base``'s target program (loaded once, shared)."""
    meta = base.meta
    target = base.target
    runner = method_of(spec).runner(spec, target, draft)
    policy = tree_policy(tree, meta, runner)
    gen = SpeculativeTokenGenerator(runner, meta, policy, spec.kv_strategy)
    return TextLLMRunner(target, gen, base.tokenizer)
