"""Building blocks shared by the target and the draft: norm, MLP, attention over a static cache.

Shapes: activations are [Q, hidden] for the Q query rows of one call; a cache is
[kv_heads, cache_size, head_dim]; a mask is an additive [Q, cache_size] float tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from etspec.models.rope import apply_rope


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A 4-D mean over (2, 3) stays inside the XNNPACK delegate; mean(-1) falls out.
        x4 = x.reshape(1, -1, 1, x.shape[-1])
        var = x4.pow(2).mean((2, 3), keepdim=True)
        return self.weight * (x4 * torch.rsqrt(var + self.eps)).reshape(x.shape)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class KVCache(nn.Module):
    """A static per-layer cache; entries are written at explicit slots.

    Initialized to zeros: ExecuTorch mutable buffers otherwise start as whatever the arena
    held, and masked garbage that happens to be NaN still poisons ``probs @ V``.
    """

    def __init__(self, kv_heads: int, cache_size: int, head_dim: int) -> None:
        super().__init__()
        self.register_buffer("k", torch.zeros(kv_heads, cache_size, head_dim), persistent=False)
        self.register_buffer("v", torch.zeros(kv_heads, cache_size, head_dim), persistent=False)

    def write(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k[:, slots] = k
        self.v[:, slots] = v

    def move(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy entries at ``src`` slots to ``dst`` slots (gather first, so overlaps are safe)."""
        k = self.k.index_select(1, src)
        v = self.v.index_select(1, src)
        self.write(dst, k, v)

    def reset(self) -> None:
        self.k.zero_()
        self.v.zero_()


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
        self.cache = KVCache(num_kv_heads, cache_size, head_dim)

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
        # Query head i uses KV head i // n_rep (HF repeat_kv); grouping queries per KV head
        # avoids materializing a repeated copy of the whole cache. bmm, not matmul: matmul
        # decomposes to expand_copy, which XNNPACK leaves outside the delegate, so every
        # call copied the whole cache twice per layer (measured: decode 8.9 -> 4.1 ms).
        n_rep = hq // hkv
        qg = q.reshape(hkv, n_rep * q_len, d)
        scores = torch.bmm(qg, self.cache.k.transpose(1, 2)) * (d**-0.5)
        scores = scores.view(hkv, n_rep, q_len, -1) + mask
        probs = torch.softmax(scores, dim=-1).view(hkv, n_rep * q_len, -1)
        out = torch.bmm(probs, self.cache.v)
        out = out.view(hq, q_len, d).transpose(0, 1).reshape(q_len, hq * d)
        return self.o_proj(out)


def causal_mask(positions: torch.Tensor, cache_size: int, fill: float) -> torch.Tensor:
    """Additive mask letting the query at position p see cache slots 0..p (slot == position)."""
    slots = torch.arange(cache_size)
    visible = slots[None, :] <= positions[:, None]
    return torch.where(visible, torch.zeros((), dtype=torch.float32), torch.full((), fill))
