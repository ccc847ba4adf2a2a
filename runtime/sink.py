"""The stop rules and streaming between a token generator and the caller."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch

from etspec.contract import STOP_BUDGET, STOP_CALLBACK, STOP_EOS, STOP_REQUESTED
from etspec.runtime.results import TokenCallback
from etspec.runtime.tokenizer import StreamDecoder


class StreamingSink:
    """Applies stop rules to what a generator emits and streams it to the callback."""

    def __init__(
        self,
        prompt: list[int],
        max_new_tokens: int,
        eos: set[int],
        decoder: StreamDecoder | None,
        callback: TokenCallback | None,
        record_logits: bool,
        stop: threading.Event,
    ) -> None:
        self.history = list(prompt)
        self.new: list[int] = []
        self.max_new = max_new_tokens
        self.eos = eos
        self.decoder = decoder
        self.callback = callback
        self.record = record_logits
        self.stop = stop
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
                self.stop_reason = STOP_EOS
                break
        self.last_emission, self.last_offered = len(take), len(tokens)
        self.new.extend(take)
        self.history.extend(take)
        if self.record:
            self.logits.append(logits[: len(take)].clone())
        if self.callback is not None:
            piece = self.decoder.push(take) if self.decoder else ""
            if self.callback(take, piece) is False:
                self.stop_reason = self.stop_reason or STOP_CALLBACK
        if self.stop.is_set():
            self.stop_reason = self.stop_reason or STOP_REQUESTED
        if not self.stop_reason and len(self.new) >= self.max_new:
            self.stop_reason = STOP_BUDGET
        return not self.stop_reason


def with_text_callback(
    callback: TokenCallback | None, text_callback: Callable[[str], None]
) -> TokenCallback:
    """``callback`` (if any) and then ``text_callback`` with each non-empty text piece."""

    def both(ids: list[int], text: str) -> bool | None:
        keep = callback(ids, text) if callback is not None else None
        if text:
            text_callback(text)
        return keep

    return both
