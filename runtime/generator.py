"""The TokenGenerator seam: how tokens after the first are produced.

``TextLLMRunner`` owns everything around generation (tokenizer, prefill, stop handling,
callbacks, stats); a ``TokenGenerator`` only continues a prefilled sequence and hands each
batch of new tokens to a ``TokenSink``, which decides whether to go on. One target decode
per token (``TextTokenGenerator``) and draft-then-verify (``SpeculativeTokenGenerator``)
are the two implementations; the runner never branches on which one it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from etspec.contract import TARGET_DECODE
from etspec.runtime.masks import MaskLayout
from etspec.runtime.prefill import PrefillResult
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.stats import GenerationStats


class TokenSink(Protocol):
    """Receives generated tokens; implemented by the runner."""

    #: Every token so far: the prompt, then the emitted tokens.
    history: list[int]

    @property
    def remaining(self) -> int:
        """How many more tokens may be emitted."""
        ...

    def emit(self, tokens: list[int], logits: torch.Tensor) -> bool:
        """Take ``tokens`` (``logits[i]``: the raw target logits ``tokens[i]`` was chosen
        from); returns False once generation must stop (EOS, budget, callback)."""
        ...


@dataclass
class GenerationContext:
    """What a generator needs to continue a prefilled sequence; nothing is hidden elsewhere.

    The target KV holds the prompt (``len(prompt)`` positions); ``first_token`` has been
    emitted and is not yet in the KV.
    """

    target: Program
    sampler: Sampler
    stats: GenerationStats
    prompt: list[int]
    prefill: PrefillResult
    first_token: int


class TokenGenerator(Protocol):
    """Produces the tokens after the first until the sink says stop."""

    #: Whether it reads the target's hidden states (the runner keeps them with the KV).
    needs_hidden: bool

    def check(self, ctx_sampler: Sampler) -> None:
        """Reject settings this generator cannot honour, before any state changes."""
        ...

    def generate(self, ctx: GenerationContext, sink: TokenSink) -> int:
        """Returns how many positions the target's committed KV now holds."""
        ...

    def reset(self) -> None: ...

    def memory(self) -> dict[str, int]:
        """Bytes this generator adds beyond the target (e.g. draft weights and KV)."""
        ...

    def programs(self) -> tuple[Program, ...]:
        """The programs this generator runs besides the target (e.g. the draft's)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What this generator is, for reports: its class, tree candidates, KV strategy
        and what its tree policy measured."""
        ...


class TextTokenGenerator:
    """Target-only decoding: one ``target_decode`` call per token."""

    needs_hidden = False

    def check(self, ctx_sampler: Sampler) -> None:
        return None

    def reset(self) -> None:
        return None

    def memory(self) -> dict[str, int]:
        return {}

    def programs(self) -> tuple[Program, ...]:
        return ()

    def describe(self) -> dict[str, Any]:
        return {"generator": type(self).__name__, "tree": None, "kv_strategy": None}

    def generate(self, ctx: GenerationContext, sink: TokenSink) -> int:
        token, position = ctx.first_token, len(ctx.prompt)
        stats, target, sampler = ctx.stats, ctx.target, ctx.sampler
        token_t = torch.empty(1, dtype=torch.long)
        layout = MaskLayout.of(target.metadata)
        while sink.remaining > 0:
            token_t[0] = token
            with stats.stage("decode"):
                position_t, mask = layout.decode_row(position)
                band = layout.band(position, mask.shape[-1])
                logits, _ = target.run(TARGET_DECODE, token_t, position_t, mask, *band)
            stats.decode_calls += 1
            token = sampler.pick(logits, sink.history)
            position += 1
            if not sink.emit([token], logits):
                break
        return position
