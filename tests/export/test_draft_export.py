"""EAGLE-3 draft: official checkpoint layout, numerics (independent reference, eager vs pte),
d2t mapping, and draft/target mismatch errors."""

from __future__ import annotations

import pytest
import torch
from helpers import TOL, causal, max_diff
from tiny import Eagle3Spec, make_eagle3_checkpoint

from etspec.artifact import open_artifact
from etspec.contract import (
    DRAFT_D2T,
    DRAFT_EXTEND,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    MASK_MIN,
    TargetMetadata,
)
from etspec.errors import CheckpointError, MetadataMismatchError
from etspec.export.export_draft import DraftExportOptions, build_draft, export_draft
from etspec.models.build import target_embedding
from etspec.models.layers import causal_mask
from etspec.models.methods import draft_methods
from etspec.runtime.program import EagerProgram, PteProgram, load_pair


def _eager_draft(case):  # type: ignore[no-untyped-def]
    target = open_artifact(case.target.pte).metadata
    model = build_draft(case.checkpoint, target, DraftExportOptions())
    methods = draft_methods(model, target.prefill_chunk, target.verify_widths, 4)
    prog = EagerProgram({k: v[0] for k, v in methods.items()}, target)
    prog.run(DRAFT_RESET)
    return model, prog


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def reference_eagle3(state, tokens, target_hidden, heads=4, kv_heads=2):  # type: ignore[no-untyped-def]
    """Plain full-sequence EAGLE-3 forward written from the EAGLE repo's algorithm."""
    s = state
    fused = target_hidden @ s["fc.weight"].T
    emb = s["embed_tokens.weight"][tokens]
    x = torch.cat(
        [
            _rms(emb, s["midlayer.input_layernorm.weight"]),
            _rms(fused, s["midlayer.hidden_norm.weight"]),
        ],
        -1,
    )
    t, h = tokens.numel(), fused.shape[-1]
    d = h // heads
    q = (x @ s["midlayer.self_attn.q_proj.weight"].T).view(t, heads, d).transpose(0, 1)
    k = (x @ s["midlayer.self_attn.k_proj.weight"].T).view(t, kv_heads, d).transpose(0, 1)
    v = (x @ s["midlayer.self_attn.v_proj.weight"].T).view(t, kv_heads, d).transpose(0, 1)
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
    ang = torch.arange(t).float()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(z):  # type: ignore[no-untyped-def]
        return z * cos + torch.cat([-z[..., d // 2 :], z[..., : d // 2]], -1) * sin

    q, k = rope(q), rope(k)
    k = k.repeat_interleave(heads // kv_heads, 0)
    v = v.repeat_interleave(heads // kv_heads, 0)
    scores = q @ k.transpose(1, 2) / d**0.5
    scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    attn = (scores.softmax(-1) @ v).transpose(0, 1).reshape(t, h)
    hs = fused + attn @ s["midlayer.self_attn.o_proj.weight"].T
    y = _rms(hs, s["midlayer.post_attention_layernorm.weight"])
    mlp = (
        torch.nn.functional.silu(y @ s["midlayer.mlp.gate_proj.weight"].T)
        * (y @ s["midlayer.mlp.up_proj.weight"].T)
    ) @ s["midlayer.mlp.down_proj.weight"].T
    hs = hs + mlp
    return _rms(hs, s["norm.weight"]) @ s["lm_head.weight"].T, hs


def _inputs(gen: torch.Generator, n: int, th: int, vocab: int = 256):  # type: ignore[no-untyped-def]
    return torch.randint(0, vocab, (n,), generator=gen), torch.randn(n, th, generator=gen)


def test_eager_draft_matches_independent_reference(artifacts) -> None:
    case = artifacts.draft()
    model, prog = _eager_draft(case)
    gen = torch.Generator().manual_seed(5)
    tokens, th = _inputs(gen, 8, model.target_hidden_width)
    pos = torch.arange(8)
    logits, out = prog.run(DRAFT_PREFILL, tokens, th, pos, torch.tensor([7]), causal(prog, pos))
    ref_logits, ref_hidden = reference_eagle3(case.state, tokens, th)
    assert max_diff(logits[0], ref_logits[-1]) < TOL
    assert max_diff(out[0], ref_hidden[-1]) < TOL


@torch.no_grad()
def test_pte_draft_matches_eager(artifacts) -> None:
    case = artifacts.draft()
    model, eager = _eager_draft(case)
    pte = PteProgram.load(case.pte, expect="draft")
    pte.run(DRAFT_RESET)
    meta = pte.metadata
    gen = torch.Generator().manual_seed(6)
    tokens, th = _inputs(gen, meta.prefill_chunk, model.target_hidden_width)
    pos = torch.arange(meta.prefill_chunk)
    args = (tokens, th, pos, torch.tensor([5]), causal(pte, pos))
    for a, b in zip(pte.run(DRAFT_PREFILL, *args), eager.run(DRAFT_PREFILL, *args), strict=True):
        assert max_diff(a, b) < TOL
    s = meta.cache_size
    # Extend: accepted tokens with fresh target states, written after the prompt.
    k, start = meta.extend_width, meta.prefill_chunk
    tokens, th = _inputs(gen, k, model.target_hidden_width)
    slots = torch.arange(start, start + k)
    mask = torch.full((k, s), MASK_MIN)
    for i in range(k):
        mask[i, : start + i + 1] = 0.0
    args = (tokens, th, slots, slots, mask)
    for a, b in zip(pte.run(DRAFT_EXTEND, *args), eager.run(DRAFT_EXTEND, *args), strict=True):
        assert max_diff(a, b) < TOL
    # Step: a tree level of 4 siblings at one position, each seeing the prefix and itself.
    w = meta.step_width
    tokens = torch.randint(0, 256, (w,), generator=gen)
    hidden = torch.randn(w, meta.hidden_size, generator=gen)
    slots = torch.arange(meta.max_context, meta.max_context + w)
    mask = torch.full((w, s), MASK_MIN)
    mask[:, : start + k] = 0.0
    mask[torch.arange(w), slots] = 0.0
    pos = torch.full((w,), start + k)
    args = (tokens, hidden, pos, slots, mask)
    for a, b in zip(pte.run(DRAFT_STEP, *args), eager.run(DRAFT_STEP, *args), strict=True):
        assert max_diff(a, b) < TOL


@torch.no_grad()
def test_narrow_extend_matches_the_widest(artifacts) -> None:
    # One extend method per target verify width; a step runs the narrowest that holds its
    # accepted rows, which must compute exactly what the widest computes for them.
    case = artifacts.tree_draft()
    pte = PteProgram.load(case.pte, expect="draft")
    meta = pte.metadata
    assert meta.extend_widths == (16, 72)
    assert [meta.extend_width_for(r) for r in (1, 16, 17, 72)] == [16, 16, 72, 72]
    assert meta.extend_method(16) == "draft_extend_16" and meta.extend_method(72) == DRAFT_EXTEND
    gen = torch.Generator().manual_seed(8)
    width = meta.target_hidden_size * len(meta.hidden_state_layers)
    tokens = torch.randint(0, meta.target_vocab_size, (72,), generator=gen)
    states = torch.randn(72, width, generator=gen)
    positions = torch.arange(72)
    mask = causal_mask(positions, torch.arange(meta.cache_size), MASK_MIN)
    outs = {}
    for e in meta.extend_widths:
        pte.run(DRAFT_RESET)
        args = (tokens[:e], states[:e], positions[:e], positions[:e], mask[:e])
        outs[e] = pte.run(meta.extend_method(e), *args)
    for narrow, wide in zip(outs[16], outs[72], strict=True):
        assert max_diff(narrow, wide[:16]) < TOL


def test_d2t_mapping(artifacts) -> None:
    case = artifacts.draft()
    model, _ = _eager_draft(case)
    (d2t,) = PteProgram.load(case.pte).constant(DRAFT_D2T)
    assert torch.equal(d2t, case.state["d2t"])
    target_ids = model.to_target_ids(torch.arange(model.cfg.draft_vocab_size))
    assert torch.equal(target_ids, torch.arange(64) + case.state["d2t"])
    assert bool(case.state["t2d"][target_ids].all())
    assert int(case.state["t2d"].sum()) == 64
    assert not torch.equal(target_ids, torch.arange(64))  # the mapping is not the identity


def test_draft_without_embedding_takes_the_targets(artifacts, tmp_path) -> None:
    case = artifacts.draft()
    ckpt = tmp_path / "no_embed"
    make_eagle3_checkpoint(ckpt, Eagle3Spec(with_embedding=False))
    target = open_artifact(case.target.pte).metadata
    with pytest.raises(CheckpointError, match="--target-checkpoint"):
        build_draft(ckpt, target, DraftExportOptions())
    model = build_draft(
        ckpt, target, DraftExportOptions(), target_embedding(case.target.checkpoint)
    )
    assert torch.equal(model.embed_tokens.weight, case.target.hf.model.embed_tokens.weight)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (Eagle3Spec(target_hidden=48), ["hidden size 48", "has 64"]),
        (Eagle3Spec(target_vocab=300), ["vocabulary size 300", "has 256"]),
        (Eagle3Spec(aux_layer_ids=(1, 2, 3)), ["layer_input[1, 2, 3]", "layer_input[2, 3, 3]"]),
    ],
)
def test_mismatched_draft_is_refused_at_export(artifacts, tmp_path, spec, words) -> None:
    case = artifacts.target("llama_gqa_rope3")
    ckpt = tmp_path / "bad_draft"
    make_eagle3_checkpoint(ckpt, spec)
    out = tmp_path / "bad.pte"
    with pytest.raises(MetadataMismatchError) as err:
        export_draft(ckpt, case.pte, out, DraftExportOptions(backend="portable"))
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    assert not out.exists()


def test_mismatched_pair_is_refused_at_load(artifacts) -> None:
    draft = artifacts.draft()
    other = artifacts.target("qwen2_bias")
    assert isinstance(open_artifact(other.pte).metadata, TargetMetadata)
    with pytest.raises(MetadataMismatchError, match="hidden size 64, the target has 48"):
        load_pair(other.pte, draft.pte)
    t, d = load_pair(draft.target.pte, draft.pte)  # the right pair loads
    assert d.metadata.target_hidden_size == t.metadata.hidden_size
