"""Building blocks shared by the target and the draft: norm, MLP, attention over a static cache.

Shapes: activations are [Q, hidden] for the Q query rows of one call; a cache is
[kv_heads, cache_size, head_dim] (``max_context`` committed slots, then scratch); a mask is
an additive [Q, W] float tensor over the slots a call attends (``column_slots``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from etspec.models.rope import apply_rope


class RMSNorm(nn.Module):
    """RMS norm over the last dimension; ``scale=False`` is the weightless variant."""

    def __init__(self, dim: int, eps: float, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim)) if scale else None
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A 4-D mean over (2, 3) stays inside the XNNPACK delegate; mean(-1) falls out.
        x4 = x.reshape(1, -1, 1, x.shape[-1])
        var = x4.pow(2).mean((2, 3), keepdim=True)
        out = (x4 * torch.rsqrt(var + self.eps)).reshape(x.shape)
        return out if self.weight is None else self.weight * out


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation (``gelu_pytorch_tanh``), spelled out.

    XNNPACK lowers ``F.gelu(x, approximate="tanh")`` to its exact erf GELU (measured with
    executorch 1.5.1: 4.7e-4 off on [-6, 6]); written out it stays in the delegate, 1e-6 off.
    """
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class MLP(nn.Module):
    """Gated MLP: ``down(act(gate(x)) * up(x))``; SiLU (Llama) or GELU-tanh (Gemma)."""

    def __init__(
        self, hidden: int, intermediate: int, bias: bool = False, gelu: bool = False
    ) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.act = gelu_tanh if gelu else F.silu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class KVCache(nn.Module):
    """A static per-layer cache; entries are written at explicit slots.

    Slots ``[0, max_context)`` are committed positions, the rest scratch. Initialized to
    zeros: ExecuTorch mutable buffers otherwise start as whatever the arena held, and
    masked garbage that happens to be NaN still poisons ``probs @ V``.
    """

    def __init__(self, kv_heads: int, cache_size: int, head_dim: int, max_context: int) -> None:
        super().__init__()
        self.max_context = max_context
        self.register_buffer("k", torch.zeros(kv_heads, cache_size, head_dim), persistent=False)
        self.register_buffer("v", torch.zeros(kv_heads, cache_size, head_dim), persistent=False)

    def write(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        # Not ``self.k[:, slots] = k``: that squeezes the values' leading size-1 dims, and
        # with one KV head ExecuTorch's in-place index_put then refuses the shapes.
        torch.ops.aten.index_put_.default(self.k, [None, slots], k)
        torch.ops.aten.index_put_.default(self.v, [None, slots], v)

    def move(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy entries at ``src`` slots to ``dst`` slots (gather first, so overlaps are safe)."""
        k = self.k.index_select(1, src)
        v = self.v.index_select(1, src)
        self.write(dst, k, v)

    def reset(self) -> None:
        self.k.zero_()
        self.v.zero_()

    def attended(self, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the slots a ``width``-column mask covers (``column_slots``).

        A mask narrower than the cache is what makes a call's cost follow the context it
        attends, not the context the artifact was exported for: its width is a dynamic
        dimension of every attending method. The gathered copy is the price (measured on a
        4-layer Gemma-width stack: 1.9 ms at 64 slots, 2.7 ms at 512, against 5.2 ms over
        a static 4,112-slot cache); a static full-width mask reads the buffers in place.
        """
        size = self.k.shape[1]
        if isinstance(width, int) and width == size:
            return self.k, self.v
        n = width - (size - self.max_context)
        if size == self.max_context:
            return self.k[:, :n], self.v[:, :n]
        c = self.max_context
        return (
            torch.cat((self.k[:, :n], self.k[:, c:]), 1),
            torch.cat((self.v[:, :n], self.v[:, c:]), 1),
        )


def kv_cache_bytes(caches: list[nn.Module]) -> int:
    """Bytes held by the K and V buffers of ``caches``."""
    return sum(b.numel() * b.element_size() for c in caches for b in c.buffers())


class Attention(nn.Module):
    """Grouped-query attention over a static cache with an explicit additive mask."""

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        cache_size: int,
        max_context: int,
        qkv_bias: bool = False,
        o_bias: bool = False,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.q_proj = nn.Linear(in_dim, num_heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(in_dim, num_kv_heads * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(in_dim, num_kv_heads * head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden, bias=o_bias)
        self.cache = KVCache(num_kv_heads, cache_size, head_dim, max_context)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        q_len = x.shape[0]
        hq, hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(q_len, hq, d).transpose(0, 1)
        k = self.k_proj(x).view(q_len, hkv, d).transpose(0, 1)
        v = self.v_proj(x).view(q_len, hkv, d).transpose(0, 1)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        # Write first, then attend: a query sees its own entry through the mask like any other.
        self.cache.write(slots, k, v)
        return self.o_proj(attend(q, self.cache, mask, d**-0.5))


def attend(
    q: torch.Tensor,
    cache: KVCache,
    mask: torch.Tensor,
    scale: float,
    band: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of queries ``q`` [heads, Q, D] over the slots ``mask`` [Q, W] covers
    (``column_slots``), or over the slots ``band`` [W] lists (a sliding layer's band, with
    ``band_mask``'s mask) -> [Q, heads * D].

    Query head i uses KV head i // n_rep (HF repeat_kv); grouping queries per KV head avoids
    materializing a repeated copy of the whole cache. bmm, not matmul: matmul decomposes to
    expand_copy, which XNNPACK leaves outside the delegate, so every call copied the whole
    cache twice per layer (measured: decode 8.9 -> 4.1 ms).
    """
    hq, q_len, d = q.shape
    if band is None:
        keys, values = cache.attended(mask.shape[-1])
    else:
        keys, values = cache.k.index_select(1, band), cache.v.index_select(1, band)
    hkv = keys.shape[0]
    n_rep = hq // hkv
    qg = q.reshape(hkv, n_rep * q_len, d)
    scores = torch.bmm(qg, keys.transpose(1, 2)) * scale
    scores = scores.view(hkv, n_rep, q_len, -1) + mask
    probs = torch.softmax(scores, dim=-1).view(hkv, n_rep * q_len, -1)
    out = torch.bmm(probs, values)
    return out.view(hq, q_len, d).transpose(0, 1).reshape(q_len, hq * d)


def column_slots(width: int, max_context: int, cache_size: int) -> torch.Tensor:
    """The cache slot of each column of a ``width``-column mask: columns ``[0, n)`` are
    slots ``[0, n)`` and the last ``cache_size - max_context`` columns are the scratch
    slots (``n = width - scratch``); a full-width mask is every slot in order."""
    n = width - (cache_size - max_context)
    return torch.cat((torch.arange(n), torch.arange(max_context, cache_size)))


def window_mask(
    positions: torch.Tensor, columns: torch.Tensor, window: int, fill: float
) -> torch.Tensor:
    """Additive band hiding cache slots at or below ``position - window`` from each query.

    ``columns``: the slot of each mask column (``column_slots``). Added to a layer's mask
    in sliding-window layers. It reads the slot index as the key's
    position, which holds for committed slots (slot == position) and errs only towards
    "visible" for speculative rows (their slots lie at or above the root position, or in
    scratch past the context), which are within ``window`` of the query whenever the tree
    is shallower than the window; export checks that (verify width <= window).
    """
    inside = columns[None, :] > positions[:, None] - window
    return torch.where(inside, torch.zeros((), dtype=torch.float32), torch.full((), fill))


def band_mask(
    mask: torch.Tensor,
    band: torch.Tensor,
    positions: torch.Tensor,
    window: int,
    max_context: int,
    cache_size: int,
    fill: float,
) -> torch.Tensor:
    """A sliding layer's mask over the slots ``band`` lists: ``mask``'s column of each band
    slot (``column_slots``: committed slot s is column s, scratch slot ``max_context + j``
    column ``W - scratch + j``) plus the window (``window_mask``).

    ``band`` is a committed run ``[lo, n)`` then every scratch slot, ``lo`` low enough for
    the lowest query position's window (``runtime/masks.MaskLayout.band``). Its length is
    a dynamic dimension of its own, so a sliding layer's attention costs its window, not
    the context. Gathering by slot, not slicing ``[lo, n)``, keeps ``lo`` out of
    torch.export's shape guards (it would have to prove ``lo >= 0`` from two independent
    dimensions).
    """
    first_scratch_col = mask.shape[-1] - (cache_size - max_context)
    columns = torch.where(band < max_context, band, band - max_context + first_scratch_col)
    return mask.index_select(1, columns) + window_mask(positions, band, window, fill)


def causal_mask(positions: torch.Tensor, columns: torch.Tensor, fill: float) -> torch.Tensor:
    """Additive mask letting the query at position p see slots 0..p (slot == position);
    ``columns``: the slot of each mask column (``column_slots``)."""
    visible = columns[None, :] <= positions[:, None]
    return torch.where(visible, torch.zeros((), dtype=torch.float32), torch.full((), fill))
