"""8da4w export (slow): the quantized target loads, runs and stays close to fp32."""

from __future__ import annotations

import pytest
import torch
from helpers import hf_forward

from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.prefill import prefill_target
from etspec.runtime.program import PteProgram


@pytest.mark.slow
def test_8da4w_target_tracks_fp32(artifacts, tmp_path) -> None:
    case = artifacts.target("llama_gqa_rope3")
    out = tmp_path / "q.pte"
    opts = TargetExportOptions(
        backend="xnnpack", dtype="8da4w", max_seq=96, prefill_chunk=8, verify_width=4
    )
    meta = export_target(case.checkpoint, out, opts)
    assert meta.dtype == "8da4w"
    assert out.stat().st_size < case.pte.stat().st_size
    prog = PteProgram.load(out)
    prog.run("target_reset")
    prompt = torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(9))
    logits = prefill_target(prog, prompt).logits[0]
    ref = hf_forward(case.hf, prompt).logits[0, -1]
    # int4 weights with int8 activations: close in direction, not to 1e-4.
    cos = torch.nn.functional.cosine_similarity(logits, ref, dim=0).item()
    assert cos > 0.95, cos


def test_int4_recipe_quantizes_every_linear_whatever_its_width() -> None:
    """8da4w: a linear whose input width is a multiple of 32 gets int4 groups, one that is
    not (48) the int8 per-row scheme; none stays fp32 under the recipe's name."""
    from torch import nn

    from etspec.models.quantize import quantize

    model = nn.Sequential(nn.Linear(64, 16), nn.Linear(48, 16))
    quantize(model, "8da4w", head="none")
    kinds = [type(m.weight.data).__name__ for m in model]
    assert all(k != "Tensor" for k in kinds), kinds
    with torch.no_grad():
        out = model[1](torch.randn(3, 48))
    assert out.shape == (3, 16) and bool(torch.isfinite(out).all())
