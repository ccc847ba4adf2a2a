"""What a generation request is and what it returns: ExecuTorch's ``GenerationConfig``
twin, the result, the request error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from etspec.errors import EtspecError
from etspec.runtime.stats import GenerationStats

#: Streaming callback: receives each batch of new token ids and the text they complete
#: ("" without a tokenizer, or while a character is incomplete). Returning ``False`` (that
#: object: ``sink.StreamingSink.emit`` tests ``is False``) stops generation after this batch,
#: stop reason ``contract.STOP_CALLBACK``; ``None`` (a callback that returns nothing),
#: ``True`` or anything else continues. The C++ runner's ``TokenCallback``
#: (runtime/cpp/src/sink.h) returns a ``bool``: ``false`` stops the same way.
TokenCallback = Callable[[list[int], str], bool | None]


@dataclass
class GenerationConfig:
    """ExecuTorch's ``GenerationConfig``, field for field, so code written against its
    ``TextLLMRunner`` (``runner.generate(prompt, config, token_callback, stats_callback)``)
    runs here unchanged; an ExecuTorch ``GenerationConfig`` object is accepted as well.

    ``max_new_tokens`` and ``seq_len`` (prompt + new tokens) of -1 mean "what the context
    holds"; ``echo`` streams the prompt's text to ``token_callback`` first; ``warming`` marks
    a warm-up run, whose text is not streamed. The defaults are ExecuTorch's (it samples at
    temperature 0.8); etspec's own ``SamplingConfig`` defaults to greedy. ``num_bos`` and
    ``num_eos`` must stay 0: the prompt gets the special tokens its ``tokenizer.json``
    declares.
    """

    echo: bool = True
    max_new_tokens: int = -1
    warming: bool = False
    seq_len: int = -1
    temperature: float = 0.8
    num_bos: int = 0
    num_eos: int = 0

    def resolve_max_new_tokens(self, max_context_len: int, num_tokens_occupied: int) -> int:
        """New tokens to generate after ``num_tokens_occupied`` prompt tokens (ExecuTorch's
        rule: the tightest of max_new_tokens, seq_len and the context)."""
        return resolve_max_new_tokens(self, max_context_len, num_tokens_occupied)


def resolve_max_new_tokens(config: Any, max_context_len: int, occupied: int) -> int:
    limit = max_context_len if config.seq_len == -1 else min(config.seq_len, max_context_len)
    room = limit - occupied
    if config.max_new_tokens != -1:
        room = min(room, config.max_new_tokens)
    return max(0, room)


class GenerationError(EtspecError):
    """A generation request the runner cannot serve (bad prompt, budget, batch)."""


@dataclass
class GenerationResult:
    token_ids: list[int]  # the new tokens (EOS included when it ended generation)
    text: str
    stop_reason: str  # "eos" | "max_new_tokens" | "callback" | "stop" (runner.stop())
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
