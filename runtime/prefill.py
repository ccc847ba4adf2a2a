"""Chunked prompt prefill over a program's fixed-width prefill method."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from etspec.contract import TARGET_PREFILL
from etspec.errors import EtspecError
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import Program


@dataclass(frozen=True)
class PrefillResult:
    logits: torch.Tensor  # [1, V] at the last prompt token
    hidden: torch.Tensor  # [T, T*H] tapped states of every prompt token


def prefill_target(program: Program, tokens: torch.Tensor, start: int = 0) -> PrefillResult:
    """Write ``tokens`` at positions ``start..start+T-1`` and return the last logits.

    The compiled width N is fixed, so the final chunk is padded: pad rows take the positions
    after the real ones, so they only write slots beyond the prompt (rewritten before they
    become visible, or in scratch), and ``last`` selects the real last row's logits.
    """
    meta = program.metadata
    n, total = meta.prefill_chunk, int(tokens.numel())
    if total == 0:
        raise EtspecError("empty prompt: give at least one token")
    if start + total > meta.max_context:
        raise EtspecError(
            f"prompt of {total} tokens at position {start} exceeds the context of "
            f"{meta.max_context}; shorten it or export with a larger --max-seq"
        )
    hidden = []
    logits = torch.empty(0)
    layout = MaskLayout.of(meta)
    for lo in range(0, total, n):
        chunk = tokens[lo : lo + n]
        real = int(chunk.numel())
        ids = torch.zeros(n, dtype=torch.long)
        ids[:real] = chunk
        positions = torch.arange(start + lo, start + lo + n, dtype=torch.long)
        mask = layout.causal(positions)
        band = layout.band(start + lo, mask.shape[-1])
        last = torch.tensor([real - 1])
        logits, h = program.run(TARGET_PREFILL, ids, positions, last, mask, *band)
        hidden.append(h[:real])
    return PrefillResult(logits, torch.cat(hidden))


def prefill_prompt(
    program: Program, ids: list[int], reuse: bool, needs_hidden: bool
) -> tuple[PrefillResult, int]:
    """Prefill ``ids`` after what the program's KV already holds of them (``reuse``: the
    common prefix, ``prefix_cache.py``; else from position 0). Returns the result, with
    hidden states of the whole prompt when ``needs_hidden``, and how many tokens were reused."""
    held = program.held
    start = held.reusable(ids, needs_hidden) if reuse else 0
    held.truncate(start)
    pre = prefill_target(program, torch.tensor(ids[start:], dtype=torch.long), start)
    if not needs_hidden:
        return pre, start
    held.keep_hidden(start, pre.hidden, program.metadata.max_context)
    assert held.hidden is not None
    return PrefillResult(pre.logits, held.hidden[: len(ids)]), start
