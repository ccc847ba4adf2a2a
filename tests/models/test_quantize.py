"""Quantization recipes (models/quantize.py) on a tiny tied target: the exported artifact
writes what the same recipe writes eagerly in torch, the C++ runner writes what Python
does (the int8/int4 embedding lookup runs in ExecuTorch's quantized kernels, which both
runtimes register), and the tied embedding is quantized apart from the lm_head."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import random_prompts
from test_cpp_runner import _cpp

from etspec.artifact import open_artifact
from etspec.models.quantize import RECIPES
from etspec.runtime.runner import load_runners
from etspec.runtime.spec import RunnerSpec

NAME = "llama_tied_q"


@pytest.fixture(scope="module")
def quantized(artifacts):  # type: ignore[no-untyped-def]
    return artifacts.target(NAME)


def test_recipe_is_recorded_and_the_file_shrinks(quantized, artifacts) -> None:  # type: ignore[no-untyped-def]
    meta = open_artifact(quantized.pte, "target").metadata
    assert meta.dtype == quantized.opts.dtype and meta.dtype in RECIPES
    # fp32 weights alone (the tied table counted once) are more than the whole file, which
    # also carries the tokenizer and the program: the weights were stored narrower.
    params = sum(p.numel() * 4 for p in quantized.hf.parameters())
    assert quantized.pte.stat().st_size < params


def test_pte_equals_the_eager_reference_of_the_recipe(quantized) -> None:  # type: ignore[no-untyped-def]
    pte = load_runners(RunnerSpec(quantized.pte))[0]
    eager = load_runners(RunnerSpec(quantized.checkpoint, reference=True,
                                    dtype=quantized.opts.dtype, max_seq=64,
                                    verify_widths=(4, 8)))[0]  # fmt: skip
    for prompt in random_prompts(4, 256, 10, seed=3):
        assert pte.generate(prompt, 16, ignore_eos=True).token_ids == (
            eager.generate(prompt, 16, ignore_eos=True).token_ids
        )


def test_cpp_runner_equals_python(quantized, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    base = load_runners(RunnerSpec(quantized.pte))[0]
    for prompt in random_prompts(3, 256, 10, seed=4):
        want = base.generate(prompt, 16, ignore_eos=True).token_ids
        (got,) = _cpp(runner_bin, quantized.pte, prompt, "--max-new-tokens", "16", "--ignore-eos")
        assert got["token_ids"] == want


def test_the_draft_s_fc_keeps_its_fp32_weights(tmp_path: Path) -> None:
    """Every recipe quantizes the draft's decoder linears but leaves ``fc`` (raw target
    states in) exactly as the checkpoint holds it."""
    from tiny import Eagle3Spec, make_eagle3_checkpoint, make_hf_target, write_tokenizer

    from etspec.models.build import DraftExportOptions, draft_program
    from etspec.runtime.eager import eager_target

    make_hf_target("llama_gqa_rope3", tmp_path / "target")
    write_tokenizer(tmp_path / "target", 256)
    weights = make_eagle3_checkpoint(tmp_path / "draft", Eagle3Spec(aux_layer_ids=(2, 3, 3)))
    target = eager_target(tmp_path / "target", max_seq=64, prefill_chunk=16, verify_width=4)
    for dtype in ("8da8w", "8da4w-mixed"):
        model = draft_program(
            tmp_path / "draft", target.metadata, DraftExportOptions(dtype=dtype)
        ).model
        assert type(model.fc.weight.data) is torch.Tensor
        assert torch.equal(model.fc.weight, weights["fc.weight"])
        q_proj = model.midlayer.self_attn.q_proj.weight.data
        assert type(q_proj) is not torch.Tensor, dtype  # a torchao quantized tensor
