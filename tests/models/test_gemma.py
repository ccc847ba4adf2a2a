"""Gemma 3 / Gemma 4 text targets: numerics against transformers, the sliding window under
speculation, the metadata, and the variants refused at export.

The shared target tests (``test_target_export.py``) hold every Gemma test config to
transformers' logits and taps (1e-4) and to 64 greedy tokens of ``generate``; here: tree
verify straddling the window against sequential forwards, speculative
greedy == target-only (chain, static and dynamic trees, both KV strategies, pte and eager),
committed KV after every step against sequential decoding, and refusals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers import (
    TOL,
    ScriptedTreeDraftRunner,
    Truth,
    check_greedy_equivalence,
    committed_kv_check,
    hf_forward,
    max_diff,
    oracle,
    pair_programs,
    path_to,
    random_prompts,
    runners,
    target_program,
)
from test_target_export import _cache_is_shared, verify_random_tree
from tiny import EXPORT_OPTIONS, GEMMA, TARGET_CONFIGS, make_hf_target

from etspec.cli import main
from etspec.errors import UnsupportedModelError
from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.static_tree import StaticTree

MODES = ["eager", "pte"]
WINDOW = 12
assert all(TARGET_CONFIGS[n]["sliding_window"] == WINDOW for n in GEMMA)


@pytest.mark.parametrize("prompt_len", [10, 30, 80])
@pytest.mark.parametrize("layout", ["position-overwrite", "scratch"])
@pytest.mark.parametrize("mode", MODES)
def test_tree_verify_across_the_window(artifacts, mode: str, layout: str, prompt_len: int) -> None:
    """Every node of a random 12-node tree (depths up to 11) equals transformers on the
    prompt plus its path: with a 10-token prompt the paths cross the window boundary, with
    30 the committed prefix already reaches past it, with 80 the sliding layers attend a
    band that starts at slot 64 (``contract.band_start``), not the whole prefix."""
    case = artifacts.target("gemma3_sliding")
    prog = target_program(case, mode)
    t = verify_random_tree(prog, layout, seed=7, prompt_len=prompt_len)
    assert int(t.depth.max()) >= 3
    if prompt_len < WINDOW:
        assert prompt_len + int(t.depth.max()) >= WINDOW  # some node sees a cut prefix
    for i in range(len(t.parents)):
        seq = torch.cat([t.prompt, t.tokens[path_to(t.parents, i)]])
        assert max_diff(t.logits[i], hf_forward(case.hf, seq).logits[0, -1]) < TOL, f"node {i}"


KV = ["position-overwrite", "scratch-commit"]
SHAPES = {
    "chain4": 4,
    "N7": StaticTree.pruned(7),
    "dynamic7": DynamicTree(depth=3, topk=2, total_tokens=8),
}
# Prompts of 1..16 tokens and budgets of 24..44: speculative steps land before, across and
# after the 12-token window; a 66-token prompt with 24 more tokens takes the sliding layers'
# band past slot 64 (``contract.band_start``), so they attend part of the prefix only.
LONG_PROMPT = torch.randint(0, 32, (66,), generator=torch.Generator().manual_seed(5)).tolist()
PROMPTS = [*random_prompts(6, vocab=32, longest=17, seed=11), LONG_PROMPT]
BUDGETS = [*[24 + (9 * i) % 21 for i in range(6)], 24]
SCHEDULE = [0, 1, 99, 0, 2]


@pytest.fixture(scope="module", params=[(t, m) for t in GEMMA[:2] for m in MODES])
def gemma_pair(request, artifacts):  # type: ignore[no-untyped-def]
    target, mode = request.param
    return f"{target} {mode}", pair_programs(artifacts.gemma_draft(target), mode, step_width=4)


@pytest.mark.parametrize("draft_kind", ["eagle3", "scripted"])
@pytest.mark.parametrize("kv", KV)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_speculative_greedy_equals_target_only(
    gemma_pair, shape: str, kv: str, draft_kind: str
) -> None:  # type: ignore[no-untyped-def]
    label, (target, draft) = gemma_pair
    truth = Truth()
    if draft_kind == "eagle3":
        runner = Eagle3DraftRunner(draft)
    else:
        runner = ScriptedTreeDraftRunner(truth, 32, lambda s: SCHEDULE[s % len(SCHEDULE)])
    base, spec = runners(target, runner, SHAPES[shape], kv)
    results = check_greedy_equivalence(
        f"{label} {draft_kind} {shape} {kv}", base, spec, PROMPTS, BUDGETS, truth
    )
    if draft_kind == "scripted":
        # Accepted runs reach past the window, not only first-token rejections.
        deep = [o.stats.accept_pos[2] for o, _ in results if len(o.stats.accept_pos) > 2]
        assert sum(deep) > 0, "no step accepted 3 draft tokens"


@pytest.mark.parametrize("kv", KV)
@pytest.mark.parametrize("name", GEMMA[:2])
def test_committed_kv_across_the_window(artifacts, name: str, kv: str) -> None:
    """After every tree step the committed caches (KV-shared layers have none of their own)
    equal sequential decoding of the committed tokens, also past the window."""
    case = artifacts.gemma_draft(name)
    target, _ = pair_programs(case, "eager", step_width=4)
    sequential, _ = pair_programs(case, "eager", step_width=4)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    base, _ = runners(target)
    ref = base.generate(prompt, 36, ignore_eos=True)
    full = [*prompt, *ref.token_ids]
    checked: list[int] = []
    check = committed_kv_check(target, sequential, full, checked)

    schedule = lambda s: SCHEDULE[s % len(SCHEDULE)]  # noqa: E731
    draft = ScriptedTreeDraftRunner(oracle(prompt, ref.token_ids), 32, schedule, check)
    _, spec = runners(target, draft, SHAPES["N7"], kv)
    out = spec.generate(prompt, 36, ignore_eos=True)
    assert out.token_ids == ref.token_ids
    assert max(checked) > 2 * WINDOW and out.stats.commit_calls > 0
    cfg = TARGET_CONFIGS[name]
    owners = cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0)
    assert len(target.cache_tensors()) == 2 * owners  # K and V per layer that owns a cache


@pytest.mark.parametrize("name", GEMMA)
def test_metadata_and_shared_cache(artifacts, name: str) -> None:
    case = artifacts.target(name)
    prog = target_program(case, "pte")
    meta = prog.metadata
    cfg = TARGET_CONFIGS[name]
    assert meta.model_family == cfg["model_type"]
    assert meta.layer_types.split(",") == [t.split("_")[0] for t in cfg["layer_types"]]
    assert meta.sliding_window == WINDOW
    assert _cache_is_shared(case.pte.read_bytes())
    # KV bytes: K and V of max_context + scratch fp32 slots per cache-owning layer.
    expected = 0
    for i, t in enumerate(cfg["layer_types"]):
        if i >= cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0):
            continue
        full = t == "full_attention" and "global_head_dim" in cfg
        heads = (
            cfg.get("num_global_key_value_heads", cfg["num_key_value_heads"])
            if full
            else cfg["num_key_value_heads"]
        )
        dim = cfg["global_head_dim"] if full else cfg["head_dim"]
        expected += 2 * heads * meta.cache_size * dim * 4
    assert meta.kv_cache_bytes == expected


def test_inspect_shows_layers_window_and_kv(artifacts) -> None:
    case = artifacts.target("gemma4_shared_ple")
    res = CliRunner().invoke(main, ["inspect", str(case.pte)])
    assert res.exit_code == 0, res.output
    assert "layer_types: sliding,full,sliding,sliding,full" in res.output
    assert "sliding_window: 12" in res.output
    meta = target_program(case, "pte").metadata
    summary = (
        f"layers: 5 (3 sliding-window of 12 keys, 2 full attention); KV cache "
        f"{meta.kv_cache_bytes / 1e6:.2f} MB for {meta.cache_size} slots"
    )
    assert summary in res.output


def _checkpoint(tmp_path: Path, name: str, **overrides) -> Path:  # type: ignore[no-untyped-def]
    ckpt = tmp_path / name
    make_hf_target(name, ckpt, **overrides)
    return ckpt


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ({"enable_moe_block": True}, "enable_moe_block=True: MoE blocks are not supported"),
        ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention='all'"),
        ({"hidden_activation": "relu"}, "hidden_activation 'relu' is not supported"),
        ({"model_type": "gemma4", "vision_config": {"hidden_size": 8}}, "vision_config"),
    ],
)
def test_unsupported_variants_are_refused(tmp_path: Path, edit: dict, words: str) -> None:  # type: ignore[type-arg]
    ckpt = _checkpoint(tmp_path, "gemma4_k_eq_v")
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(UnsupportedModelError, match=words.replace("(", r"\(")):
        export_target(ckpt, tmp_path / "out.pte", TargetExportOptions(max_seq=32, verify_width=4))
    res = CliRunner().invoke(main, ["export", "target", str(ckpt), "-o", str(tmp_path / "o.pte")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert words in lines[0]
    assert not (tmp_path / "o.pte").exists() and not (tmp_path / "out.pte").exists()


def test_verify_wider_than_the_window_is_refused(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path, "gemma3_sliding")
    opts = TargetExportOptions(max_seq=32, verify_width=WINDOW + 1, prefill_chunk=8)
    with pytest.raises(
        UnsupportedModelError, match=f"--verify-width {WINDOW + 1} exceeds sliding_window={WINDOW}"
    ):
        export_target(ckpt, tmp_path / "out.pte", opts)
    assert EXPORT_OPTIONS["gemma3_sliding"].verify_width <= WINDOW


def test_default_verify_widths_fit_every_tiny_config(tmp_path: Path) -> None:
    """Without options every test config builds: the default verify widths (4, 8, 16) are
    cut to a Gemma's 12-token window (4, 8, 12) and to a short context."""
    from etspec.models.build import build_target
    from etspec.models.checkpoint import read_config

    for name in TARGET_CONFIGS:
        ckpt = tmp_path / name
        make_hf_target(name, ckpt)
        opts = TargetExportOptions(backend="portable")
        resolved = opts.resolved(read_config(ckpt), 4096)
        want = (4, 8, WINDOW) if name.startswith("gemma") else (4, 8, 16)
        assert resolved.verify_widths == want, name
        build_target(ckpt, opts)
    short = TargetExportOptions(max_seq=6).resolved(read_config(tmp_path / "llama_tied"), 6)
    assert short.verify_widths == (4, 6)


@pytest.mark.slow
def test_default_export_of_a_gemma4_with_a_short_window(tmp_path: Path) -> None:
    """`etspec export target` with no flags at all, on a Gemma 4 config whose 12-token
    window is narrower than the widest default verify (4 minutes on 2 cores)."""
    make_hf_target("gemma4_k_eq_v", tmp_path / "gemma4_k_eq_v")
    out = tmp_path / "g4.pte"
    res = CliRunner().invoke(
        main, ["export", "target", str(tmp_path / "gemma4_k_eq_v"), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    from etspec.artifact import open_artifact

    assert open_artifact(out, "target").metadata.verify_widths == (4, 8, WINDOW)
