"""One thin ``nn.Module`` per program method, all wrapping the same model instance.

Export lowers these into one ``.pte`` whose methods share the model's cache buffers; the
eager reference program calls the very same modules. Each wrapper's docstring is its
method's contract (inputs, outputs, which cache slots it writes).
"""

from __future__ import annotations

import torch
from torch import nn

from etspec.contract import (
    ASSISTANT_STEP,
    DRAFT_COMMIT,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    MASK_MIN,
    TARGET_COMMIT,
    TARGET_DECODE,
    TARGET_PREFILL,
    TARGET_RESET,
    extend_method_name,
    verify_method_name,
)
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.layers import causal_mask
from etspec.models.target import TargetModel

Example = tuple[torch.Tensor, ...]


class TargetPrefill(nn.Module):
    """``(tokens[N], positions[N], last[1]) -> (logits[1, V], hidden[N, T*H])``.

    Writes slot == position for every row. ``last`` picks the row whose logits are returned
    (the last real token; a short final chunk is padded with rows at higher positions, which
    write only slots that are rewritten before they become visible).
    """

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, positions, last):  # type: ignore[no-untyped-def]
        mask = causal_mask(positions, self.model.cache_size, MASK_MIN)
        h, hidden = self.model.body(tokens, positions, positions, mask)
        return self.model.logits(h.index_select(0, last)), hidden


class TargetDecode(nn.Module):
    """``(token[1], position[1]) -> (logits[1, V], hidden[1, T*H])``; writes slot == position."""

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, token, position):  # type: ignore[no-untyped-def]
        mask = causal_mask(position, self.model.cache_size, MASK_MIN)
        h, hidden = self.model.body(token, position, position, mask)
        return self.model.logits(h), hidden


class TargetVerify(nn.Module):
    """``(tokens[K], positions[K], slots[K], mask[K, S]) -> (logits[K, V], hidden[K, T*H])``.

    Everything explicit: node i is written at ``slots[i]`` with RoPE position
    ``positions[i]`` (root position + depth) and sees exactly the slots ``mask[i]`` leaves at 0
    (committed prefix + its ancestors + itself). A chain is a path-shaped tree.
    """

    def __init__(self, model: TargetModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, positions, slots, mask):  # type: ignore[no-untyped-def]
        h, hidden = self.model.body(tokens, positions, slots, mask)
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
) -> dict[str, tuple[nn.Module, Example]]:
    """Method name -> (wrapper, example inputs with the compiled static shapes).

    One verify method per width: verify cost grows with width, so a small tree runs the
    narrowest method that holds it (the widest is ``target_verify``, the others
    ``target_verify_<K>``). An ``assistant`` drafter adds ``assistant_step``.
    """
    extra: dict[str, tuple[nn.Module, Example]] = {}
    if assistant is not None:
        w, hb = assistant_step_width, model.cfg.hidden_size
        extra[ASSISTANT_STEP] = (
            AssistantStep(model, assistant),
            (torch.zeros(w, dtype=torch.long), torch.zeros(w, hb), torch.tensor([1])),
        )
    s, n = model.cache_size, prefill_chunk
    k = max(verify_widths)
    verify = {
        verify_method_name(w, k): (
            TargetVerify(model),
            (
                torch.zeros(w, dtype=torch.long),
                torch.arange(w),
                torch.arange(w),
                torch.zeros(w, s),
            ),
        )
        for w in sorted(set(verify_widths))
    }
    return {
        TARGET_PREFILL: (
            TargetPrefill(model),
            (torch.zeros(n, dtype=torch.long), torch.arange(n), torch.tensor([n - 1])),
        ),
        TARGET_DECODE: (
            TargetDecode(model),
            (torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)),
        ),
        **verify,
        TARGET_COMMIT: (CacheCommit(model), (torch.arange(k), torch.arange(k))),
        TARGET_RESET: (CacheReset(model), ()),
        **extra,
    }


class DraftPrefill(nn.Module):
    """``(tokens[N], target_hidden[N, T*Ht], positions[N], last[1])
    -> (logits[1, Vd], hidden_out[1, H])``; writes slot == position, causal."""

    def __init__(self, model: Eagle3Draft) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens, target_hidden, positions, last):  # type: ignore[no-untyped-def]
        mask = causal_mask(positions, self.model.cache_size, MASK_MIN)
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
) -> dict[str, tuple[nn.Module, Example]]:
    """Method name -> (wrapper, example inputs). One extend method per width, like verify:
    a step that accepted few tokens runs the narrowest extend that holds them."""
    s, th, h = model.cache_size, model.target_hidden_width, model.cfg.hidden_size
    n, k, w = prefill_chunk, max(extend_widths), step_width
    long = torch.long

    def rows(count: int, state_width: int) -> Example:
        """``(tokens, states, positions, slots, mask)`` of ``count`` rows."""
        return (
            torch.zeros(count, dtype=long),
            torch.zeros(count, state_width),
            torch.arange(count),
            torch.arange(count),
            torch.zeros(count, s),
        )

    extend = {
        extend_method_name(e, k): (DraftExtend(model), rows(e, th))
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
            ),
        ),
        **extend,
        DRAFT_STEP: (DraftStep(model), rows(w, h)),
        DRAFT_COMMIT: (CacheCommit(model), (torch.arange(k), torch.arange(k))),
        DRAFT_RESET: (CacheReset(model), ()),
    }
