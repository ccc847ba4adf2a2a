"""One thin ``nn.Module`` per program method, all wrapping the same model instance.

Export lowers these into one ``.pte`` whose methods share the model's cache buffers; the
eager reference program calls the very same modules. Each wrapper's docstring is its
method's contract (inputs, outputs, which cache slots it writes).

Every attending method takes its additive ``mask[Q, W]`` from the caller, and ``W`` is the
one dynamic dimension of the program: the columns are the slots the call attends
(``layers.column_slots``: the first ``W - scratch`` committed slots, then the scratch
slots), so a call costs what the context it attends costs, whatever ``max_context`` the
artifact was exported with. Callers size ``W`` with ``contract.mask_width``. A target with
sliding layers (Gemma) also takes ``band[Wb]`` after the mask, the slots its sliding layers
attend (``layers.band_mask``), a second dynamic dimension, so those layers cost their
window, not the context.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from etspec.contract import (
    ASSISTANT_STEP,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    TARGET_COMMIT,
    TARGET_DECODE,
    TARGET_PREFILL,
    TARGET_RESET,
    extend_method_name,
    verify_method_name,
)
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.target import TargetModel

Example = tuple[torch.Tensor, ...]
#: Per input, its dynamic dimensions (``torch.export`` ``dynamic_shapes``), or None.
Dynamic = tuple[dict[int, Dim] | None, ...] | None
Methods = dict[str, tuple[nn.Module, Example, Dynamic]]


def _mask_example(rows: int, max_context: int, cache_size: int) -> torch.Tensor:
    """A ``[rows, W]`` example mask whose width export keeps symbolic (not 0 or 1, and
    distinct from the other example sizes so export does not equate them)."""
    n = max(2, min(max_context, 17))
    return torch.zeros(rows, n + cache_size - max_context)


def _mask_dim(max_context: int, cache_size: int) -> Dim:
    # At least two committed columns: export specializes a slice of length 1.
    scratch = cache_size - max_context
    return Dim("mask_width", min=scratch + 2, max=cache_size)


def _band_example(max_context: int, cache_size: int) -> torch.Tensor:
    """A band (``layers.band_mask``): committed slots ``[lo, n)`` of the mask example's
    ``n``, then scratch; its length differs from the mask's, so export keeps them apart."""
    n = max(2, min(max_context, 17))
    return torch.cat((torch.arange(min(3, n - 2), n), torch.arange(max_context, cache_size)))


def _band_dim(max_context: int, cache_size: int) -> Dim:
    return Dim("band_length", min=cache_size - max_context + 2, max=cache_size)


def _with_mask(count: int, index: int, dim: Dim) -> Dynamic:
    """``dynamic_shapes`` of a method with ``count`` inputs whose input ``index`` is the mask."""
    return tuple({1: dim} if i == index else None for i in range(count))


class TargetPrefill(nn.Module):
    """``(tokens[N], positions[N], last[1], mask[N, W][, band[Wb]])
    -> (logits[1, V], hidden[N, T*H])``.

    Writes slot == position for every row; ``mask`` is causal (``layers.causal_mask``).
    ``last`` picks the row whose logits are returned (the last real token; a short final
    chunk is padded with rows at higher positions, which write only slots that are
    rewritten before they become visible).
    """

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, positions, last, mask, band=None):  # type: ignore[no-untyped-def]
        h, hidden = self.model.body(tokens, positions, positions, mask, band)
        return self.model.logits(h.index_select(0, last)), hidden


class TargetDecode(nn.Module):
    """``(token[1], position[1], mask[1, W][, band[Wb]]) -> (logits[1, V], hidden[1, T*H])``;
    writes slot == position; ``mask`` is causal."""

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, token, position, mask, band=None):  # type: ignore[no-untyped-def]
        h, hidden = self.model.body(token, position, position, mask, band)
        return self.model.logits(h), hidden


class TargetVerify(nn.Module):
    """``(tokens[K], positions[K], slots[K], mask[K, S][, band[Wb]])
    -> (logits[K, V], hidden[K, T*H])``.

    Everything explicit: node i is written at ``slots[i]`` with RoPE position
    ``positions[i]`` (root position + depth) and sees exactly the slots ``mask[i]`` leaves at 0
    (committed prefix + its ancestors + itself). A chain is a path-shaped tree.
    """

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, positions, slots, mask, band=None):  # type: ignore[no-untyped-def]
        h, hidden = self.model.body(tokens, positions, slots, mask, band)
        return self.model.logits(h), hidden


class CacheCommit(nn.Module):
    """``(src[C], dst[C]) -> dst``: copy every cache's entries at ``src`` to ``dst``.

    Used to compact an accepted tree path into contiguous committed slots, and by the
    scratch-commit strategy to move accepted scratch entries home. Unused rows pass
    ``src == dst`` (a no-op copy).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src, dst):  # type: ignore[no-untyped-def]
        for cache in self.model.caches():
            cache.move(src, dst)
        return dst + 0


class CacheReset(nn.Module):
    """``() -> zeros[1]``: zero every cache (load time, and between unrelated requests)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self):  # type: ignore[no-untyped-def]
        for cache in self.model.caches():
            cache.reset()
        return torch.zeros(1)


class AssistantStep(nn.Module):
    """``(tokens[W], states[W, Hb], position[1]) -> (logits[W, V], states_out[W, Hb])``:
    one drafting call of an assistant that reads the target's committed caches (slots below
    ``position``) and writes nothing. Exported into the target program for that sharing."""

    def __init__(self, model: TargetModel, assistant: nn.Module) -> None:
        super().__init__()
        # ``model``, as in every target wrapper: methods share a cache buffer by its name.
        self.model = model
        self.assistant = assistant

    def forward(self, tokens, states, position):  # type: ignore[no-untyped-def]
        return self.assistant.step(self.model, tokens, states, position)


def target_methods(
    model: TargetModel,
    prefill_chunk: int,
    verify_widths: tuple[int, ...],
    assistant: nn.Module | None = None,
    assistant_step_width: int = 0,
) -> Methods:
    """Method name -> (wrapper, example inputs with the compiled static shapes, the
    dynamic mask width and, for a model with sliding layers, the dynamic band length).

    One verify method per width: verify cost grows with width, so a small tree runs the
    narrowest method that holds it (the widest is ``target_verify``, the others
    ``target_verify_<K>``). An ``assistant`` drafter adds ``assistant_step``.
    """
    extra: Methods = {}
    if assistant is not None:
        w, hb = assistant_step_width, model.cfg.hidden_size
        extra[ASSISTANT_STEP] = (
            AssistantStep(model, assistant),
            (torch.zeros(w, dtype=torch.long), torch.zeros(w, hb), torch.tensor([1])),
            None,
        )
    c, s, n = model.max_context, model.cache_size, prefill_chunk
    k = max(verify_widths)
    width = _mask_dim(c, s)
    banded = model.sliding_window > 0

    def attending(
        module: nn.Module, rows: int, *inputs: torch.Tensor
    ) -> tuple[nn.Module, Example, Dynamic]:
        """A method of ``rows`` query rows: ``inputs``, the mask, then, for a model with
        sliding layers, the band (``TargetModel.body``)."""
        mask = _mask_example(rows, c, s)
        dims = _with_mask(len(inputs) + 1, len(inputs), width)
        if not banded:
            return module, (*inputs, mask), dims
        return module, (*inputs, mask, _band_example(c, s)), (*dims, {0: _band_dim(c, s)})

    verify: Methods = {
        verify_method_name(w, k): attending(
            TargetVerify(model),
            w,
            torch.zeros(w, dtype=torch.long),
            torch.arange(w),
            torch.arange(w),
        )
        for w in sorted(set(verify_widths))
    }
    return {
        TARGET_PREFILL: attending(
            TargetPrefill(model),
            n,
            torch.zeros(n, dtype=torch.long),
            torch.arange(n),
            torch.tensor([n - 1]),
        ),
        TARGET_DECODE: attending(
            TargetDecode(model),
            1,
            torch.zeros(1, dtype=torch.long),
            torch.zeros(1, dtype=torch.long),
        ),
        **verify,
        TARGET_COMMIT: (CacheCommit(model), (torch.arange(k), torch.arange(k)), None),
        TARGET_RESET: (CacheReset(model), (), None),
        **extra,
    }


class DraftPrefill(nn.Module):
    """``(tokens[N], target_hidden[N, T*Ht], positions[N], last[1], mask[N, W])
    -> (logits[1, Vd], hidden_out[1, H])``; writes slot == position; ``mask`` is causal."""

    def __init__(self, model: Eagle3Draft) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, target_hidden, positions, last, mask):  # type: ignore[no-untyped-def]
        out = self.model.body(tokens, self.model.fuse(target_hidden), positions, positions, mask)
        out = out.index_select(0, last)
        return self.model.logits(out), out


class DraftExtend(nn.Module):
    """``(tokens[K], target_hidden[K, T*Ht], positions[K], slots[K], mask[K, S])
    -> (logits[K, Vd], hidden_out[K, H])``: feed tokens with fresh target states."""

    def __init__(self, model: Eagle3Draft) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, target_hidden, positions, slots, mask):  # type: ignore[no-untyped-def]
        out = self.model.body(tokens, self.model.fuse(target_hidden), positions, slots, mask)
        return self.model.logits(out), out


class DraftStep(nn.Module):
    """``(tokens[W], hidden[W, H], positions[W], slots[W], mask[W, S])
    -> (logits[W, Vd], hidden_out[W, H])``: one drafting level fed the draft's own states."""

    def __init__(self, model: Eagle3Draft) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, hidden, positions, slots, mask):  # type: ignore[no-untyped-def]
        out = self.model.body(tokens, hidden, positions, slots, mask)
        return self.model.logits(out), out


def draft_methods(
    model: Eagle3Draft, prefill_chunk: int, extend_widths: tuple[int, ...], step_width: int
) -> Methods:
    """Method name -> (wrapper, example inputs). One extend method per width, like verify:
    a step that accepted few tokens runs the narrowest extend that holds them."""
    c, s = model.max_context, model.cache_size
    th, h = model.target_hidden_width, model.cfg.hidden_size
    n, k, w = prefill_chunk, max(extend_widths), step_width
    long = torch.long
    width = _mask_dim(c, s)

    def rows(count: int, state_width: int) -> Example:
        """``(tokens, states, positions, slots, mask)`` of ``count`` rows."""
        return (
            torch.zeros(count, dtype=long),
            torch.zeros(count, state_width),
            torch.arange(count),
            torch.arange(count),
            _mask_example(count, c, s),
        )

    extend: Methods = {
        extend_method_name(e, k): (DraftExtend(model), rows(e, th), _with_mask(5, 4, width))
        for e in sorted(set(extend_widths))
    }
    return {
        DRAFT_PREFILL: (
            DraftPrefill(model),
            (
                torch.zeros(n, dtype=long),
                torch.zeros(n, th),
                torch.arange(n),
                torch.tensor([n - 1]),
                _mask_example(n, c, s),
            ),
            _with_mask(5, 4, width),
        ),
        **extend,
        DRAFT_STEP: (DraftStep(model), rows(w, h), _with_mask(5, 4, width)),
        DRAFT_RESET: (CacheReset(model), (), None),
    }
