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
