"""models/hqq.py: HQQ's scale fitting a block of rows at a time gives torchao's scales and
quantized values bit for bit: where the iterations stop early, where they run out, where
some blocks reach a fixed point before others, in each dtype and group size etspec uses."""

from __future__ import annotations

import pytest
import torch

from etspec import logs
from etspec.models import hqq

with logs.quiet():
    from torchao.quantization.quant_primitives import (
        _choose_qparams_and_quantize_scale_only_hqq as torchao_hqq,
    )


@pytest.mark.parametrize(
    ("rows", "cols", "group", "bits", "iters", "dtype"),
    [
        (1000, 640, 640, 8, 20, torch.float32),  # per row, int8 (linears, lm_head)
        (1000, 640, 32, 4, 20, torch.float32),  # groups of 32, int4 (embedding)
        (777, 96, 32, 4, 2, torch.float32),  # the iterations run out before converging
        (513, 64, 64, 8, 20, torch.bfloat16),  # the scales come back in the weight's dtype
    ],
)
def test_same_as_torchao(
    monkeypatch: pytest.MonkeyPatch,
    rows: int, cols: int, group: int, bits: int, iters: int, dtype: torch.dtype,
) -> None:  # fmt: skip
    monkeypatch.setattr(hqq, "BLOCK_BYTES", 64 * cols * 4)  # blocks of 64 rows, a short last
    torch.manual_seed(rows)
    w = (torch.randn(rows, cols) * torch.rand(rows, 1)).to(dtype)
    w[:40] = w[:40].sign() * 0.25  # these rows reach a fixed point at once
    w.requires_grad_(True)  # as a module's weight: no autograd graph of the iterations
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    with torch.no_grad():
        q0, s0 = torchao_hqq(w, [1, group], qmin, qmax, iters=iters)
    q1, s1 = hqq.hqq_scale_only(w, [1, group], qmin, qmax, iters=iters)
    assert q1.dtype == torch.int8 and s1.dtype == s0.dtype and s1.grad_fn is None
    assert torch.equal(q1, q0.to(torch.int8))
    assert torch.equal(s1, s0)


def test_quantize_uses_it_only_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchao's own function is back once ``fitted_in_blocks`` closes."""
    from torchao.quantization.quantize_.workflows.intx import intx_unpacked_to_int8_tensor as m

    original = m._choose_qparams_and_quantize_scale_only_hqq
    with hqq.fitted_in_blocks():
        assert m._choose_qparams_and_quantize_scale_only_hqq is not original
    assert m._choose_qparams_and_quantize_scale_only_hqq is original
