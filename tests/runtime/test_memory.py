"""One packed copy of the weights: XNNPACK's weight cache is on by default in Python and the
C++ runner, changes no output, and the methods after the first then add next to nothing to
resident memory (they each packed their own copy before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import random_prompts
from tiny import make_hf_target

from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.runner import load_runners
from etspec.runtime.spec import RunnerSpec, TreeSettings


def _ids(spec: RunnerSpec, prompts: list[list[int]]) -> list[list[int]]:
    base, speculative = load_runners(spec)
    out = []
    for runner in (base, speculative):
        assert runner is not None
        out += [runner.generate(p, 24, ignore_eos=True).token_ids for p in prompts]
    return out


def test_python_ids_are_the_same_with_the_cache_on_and_off(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.xnnpack import weight_cache_enabled

    pair = artifacts.small_draft()  # XNNPACK target and draft
    prompts = random_prompts(4, 16, 12, seed=5)
    tree = TreeSettings("chain", 3)
    on = _ids(RunnerSpec(pair.target.pte, pair.pte, tree=tree), prompts)
    assert weight_cache_enabled()  # the default
    off = _ids(RunnerSpec(pair.target.pte, pair.pte, tree=tree, weight_cache=False), prompts)
    assert not weight_cache_enabled()
    assert on == off


def test_cpp_ids_are_the_same_with_the_cache_on_and_off(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.small_draft()
    args = [str(runner_bin), "--target", str(pair.target.pte), "--draft", str(pair.pte),
            "--prompt-ids", "3,1,4,1,5", "--max-new-tokens", "30", "--ignore-eos",
            "--json"]  # fmt: skip
    runs = [subprocess.run([*args, *extra], capture_output=True, text=True, timeout=120)
            for extra in ([], ["--no-weight-cache"])]  # fmt: skip
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert json.loads(runs[0].stdout)["token_ids"] == json.loads(runs[1].stdout)["token_ids"]


@pytest.fixture(scope="module")
def wide_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A target with enough weight (about 9 MB) for per-method packing to stand out of the
    allocator's noise, and four delegated methods."""
    root = tmp_path_factory.mktemp("wide")
    make_hf_target("llama_gqa_rope3", root / "ckpt", hidden_size=256, intermediate_size=768,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                   vocab_size=1024)  # fmt: skip
    pte = root / "wide.pte"
    opts = TargetExportOptions(max_seq=64, prefill_chunk=8, verify_width=8,
                               narrow_verify_widths=(4,))  # fmt: skip
    export_target(root / "ckpt", pte, opts)
    return pte


def _loaded(pte: Path, *flags: str) -> dict[str, int]:
    """`etspec inspect --memory` in a process of its own: what each load step adds."""
    res = subprocess.run(
        [sys.executable, "-m", "etspec", "inspect", "--memory", "--json", str(pte), *flags],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["memory"]["load_steps_bytes"]


def test_methods_after_the_first_pack_nothing_with_the_cache(wide_target: Path) -> None:
    methods = ["target_decode", "target_prefill", "target_verify", "target_verify_4"]
    on, off = _loaded(wide_target), _loaded(wide_target, "--no-weight-cache")
    weights = wide_target.stat().st_size
    # Without the cache every delegated method holds its own packed copy of the weights.
    assert all(off[m] > 0.5 * weights for m in methods), off
    later_on = sum(sorted(on[m] for m in methods)[:-1])  # all but the one that packed
    later_off = sum(sorted(off[m] for m in methods)[:-1])
    assert later_on < 0.1 * later_off, (on, off)


def test_no_method_plans_a_copy_of_the_shared_caches(artifacts) -> None:  # type: ignore[no-untyped-def]
    """The caches live in one shared arena; no method's activation arena also reserves
    their size (ExecuTorch planned each in-place cache write's output there: a KV-sized
    hole per method, `export/lowering._SharedBufferPlanning`)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    from etspec.artifact import open_artifact

    case = artifacts.target("llama_gqa_rope3")
    kv = open_artifact(case.pte, "target").metadata.kv_cache_bytes
    program = deserialize_pte_binary(case.pte.read_bytes()).program
    plans = {p.name: p.non_const_buffer_sizes for p in program.execution_plan}
    assert plans["target_commit"][2] >= kv  # the shared arena
    # Commit gathers the K rows it moves; decode and verify also gather attended slots.
    assert plans["target_commit"][1] < kv / 10, (plans["target_commit"], kv)
    for name in ("target_prefill", "target_decode", "target_verify"):
        assert plans[name][1] < kv / 2, (name, plans[name], kv)
