"""HQQ's scale fitting (torchao's ``hqq_scale_only``) a block of rows at a time.

torchao fits every scale of a weight at once: each of its (up to) 20 iterations makes about
eight passes over the whole matrix, and Gemma 3 270M's embedding and lm_head are 671 MB
each in fp32, so every pass streams them from memory (measured: 15-18 s per matrix, most of
the export's quantize stage). The rows are independent except for when the iterations stop
(the first iteration whose largest relative scale change over *all* rows is below the
tolerance), so here each block of rows, small enough to stay in cache, runs its iterations
on its own while keeping the scales of every iteration that could be that stop; the stop is
then found over all blocks, and each block's scales from it are used. The result is torchao's
bit for bit (same operations on the same values, tests/models/test_hqq.py), about 8x faster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

BLOCK_BYTES = 4 << 20  # rows per block: about this much fp32 weight (stays in L2/L3)


@contextlib.contextmanager
def fitted_in_blocks() -> Iterator[None]:
    """While open, torchao's HQQ scale fitting (as ``quantize_`` calls it) runs here."""
    from torchao.quantization.quantize_.workflows.intx import intx_unpacked_to_int8_tensor

    module, name = intx_unpacked_to_int8_tensor, "_choose_qparams_and_quantize_scale_only_hqq"
    original = getattr(module, name)

    def fit(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return hqq_scale_only(*args, **kwargs, fallback=original)

    setattr(module, name, fit)
    try:
        yield
    finally:
        setattr(module, name, original)


@dataclass
class _Block:
    """One block of rows: the largest relative scale change at each iteration, the scales
    after each iteration that could be the last (change below the tolerance, or the
    iterations' end), and the
    iteration from which the scales no longer change (a fixed point: every later iteration
    computes the same values again)."""

    rel: torch.Tensor
    kept: dict[int, torch.Tensor] = field(default_factory=dict)
    fixed: int | None = None

    def scale_at(self, last: int) -> torch.Tensor:
        if last in self.kept:
            return self.kept[last]
        assert self.fixed is not None and last > self.fixed
        return self.kept[self.fixed]


@torch.no_grad()  # the weights may require grad: no autograd graph of 20 iterations
def hqq_scale_only(
    hp_tensor: torch.Tensor,
    block_size: list[int],
    qmin: int,
    qmax: int,
    *,
    iters: int = 20,
    stochastic: bool = False,
    early_stop_tol: float = 1e-5,
    fallback: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """torchao's ``_choose_qparams_and_quantize_scale_only_hqq`` (same arguments, same
    values; ``qdata`` comes as int8, which its caller converts it to). Stochastic rounding
    draws random numbers in torchao's order, so it goes to ``fallback``."""
    if stochastic or hp_tensor.ndim != 2:
        assert fallback is not None, "stochastic HQQ runs in torchao"
        return fallback(
            hp_tensor, block_size, qmin, qmax,
            iters=iters, stochastic=stochastic, early_stop_tol=early_stop_tol,
        )  # fmt: skip
    n, k = hp_tensor.shape
    group = int(block_size[1])
    assert block_size[0] == 1 and k % group == 0, f"block size {block_size} for {n}x{k}"
    w = hp_tensor.to(torch.float32).contiguous().view(n, k // group, group)
    rows = max(1, BLOCK_BYTES // (k * 4))
    qabs = max(abs(qmin), abs(qmax)) or 1
    steps = max(1, iters)
    blocks = [
        _fit(w[s : s + rows], qmin, qmax, qabs, steps, early_stop_tol) for s in range(0, n, rows)
    ]
    rel = torch.stack([b.rel for b in blocks]).amax(dim=0)  # over all rows, per iteration
    below = (rel < early_stop_tol).nonzero()
    last = int(below[0]) if len(below) else steps - 1
    scale = torch.cat([b.scale_at(last) for b in blocks])
    qdata = torch.empty(n, k, dtype=torch.int8)
    for s in range(0, n, rows):
        q = (w[s : s + rows] / scale[s : s + rows].unsqueeze(-1)).round().clamp(qmin, qmax)
        qdata[s : s + rows] = q.view(-1, k)
    return qdata, scale.to(hp_tensor.dtype)


def _fit(w: torch.Tensor, qmin: int, qmax: int, qabs: int, steps: int, tol: float) -> _Block:
    """torchao's iterations on one block of rows, each one's change recorded."""
    eps = torch.finfo(torch.float32).eps
    scale = (w.abs().amax(dim=2) / qabs).clamp_min(eps)
    prev = scale.clone()
    block = _Block(rel=torch.zeros(steps))
    for i in range(steps):
        q = (w / scale.unsqueeze(-1)).round().clamp(qmin, qmax)
        num = (w * q).sum(dim=2, dtype=torch.float32)
        den = (q * q).sum(dim=2, dtype=torch.float32)
        scale = torch.where(den > 0, num / den, prev).clamp_min(eps).abs()
        rel = ((scale - prev).abs() / prev.clamp_min(eps)).max()
        block.rel[i] = rel
        if rel < tol or i == steps - 1:  # a possible stop, or the last iteration
            block.kept[i] = scale
        if rel == 0:  # later iterations recompute these scales (their change stays 0)
            block.fixed = i
            break
        prev = scale
    return block
