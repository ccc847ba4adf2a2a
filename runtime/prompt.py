"""A prompt as token ids, checked at the API's door: text through the artifact's tokenizer
(never a string holding lone surrogates), ids of any integer kind (Python, numpy, torch)
inside the vocabulary, one sequence at a time."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from etspec.contract import message
from etspec.runtime.results import GenerationError
from etspec.runtime.tokenizer import Tokenizer


def prompt_ids(
    prompt: str | Sequence[int] | torch.Tensor, tokenizer: Tokenizer | None, vocab: int
) -> list[int]:
    """``prompt`` (text, a list of ids, a tensor or a numpy array) as a list of token ids."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise GenerationError(message("no_tokenizer"))
        bad = next((i for i, c in enumerate(prompt) if "\ud800" <= c <= "\udfff"), None)
        if bad is not None:  # a lone surrogate: not text, and no tokenizer takes it
            raise GenerationError(
                f"the prompt is not valid text (a lone surrogate U+{ord(prompt[bad]):04X} at "
                f"offset {bad}); pass a str of Unicode characters"
            )
        return tokenizer.encode(prompt)
    if isinstance(prompt, bytes | bytearray | memoryview):  # a Sequence of ints, not ids
        raise GenerationError(
            "prompt is bytes: pass text as str (prompt.decode('utf-8')) or token ids as a "
            "list of int"
        )
    if not isinstance(prompt, torch.Tensor | Sequence) and not hasattr(prompt, "__array__"):
        raise GenerationError(
            "prompt must be text (str), token ids (a list of int) or a tensor, got "
            f"{type(prompt).__name__}"
        )
    if isinstance(prompt, torch.Tensor):
        if prompt.dim() > 2:
            raise GenerationError(
                f"a prompt tensor of shape {list(prompt.shape)}: pass token ids as [n] or [1, n]"
            )
        if prompt.dim() == 2 and prompt.shape[0] != 1:
            raise GenerationError(
                f"batch size {prompt.shape[0]} is not supported: etspec generates one "
                "sequence at a time; call generate once per prompt"
            )
        prompt = prompt.reshape(-1).tolist()
    ids = list(prompt)
    if ids and isinstance(ids[0], list | tuple):
        if len(ids) != 1:
            raise GenerationError(
                f"batch size {len(ids)} is not supported: etspec generates one sequence "
                "at a time; call generate once per prompt"
            )
        ids = list(ids[0])
    # numpy and torch integers as well as int; never a float or a bool.
    wrong = next((t for t in ids if not _is_index(t)), None)
    if wrong is not None:
        raise GenerationError(
            f"prompt token ids must be integers, got {str(wrong)[:40]} ({type(wrong).__name__})"
        )
    ids = [operator.index(t) for t in ids]
    bad_ids = [t for t in ids if not 0 <= t < vocab]
    if bad_ids:
        raise GenerationError(message("token_outside_vocab", token=bad_ids[0], vocab=vocab))
    return ids


def _is_index(value: Any) -> bool:
    """An integer of any kind (int, numpy, a 0-d tensor), not a bool."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
