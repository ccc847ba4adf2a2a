"""``--backend openvino``: a pair lowered to ExecuTorch's OpenVINO delegate runs exactly in
both runtimes, in every tree mode under both KV strategies, and equals the XNNPACK fp32
export of the same checkpoint. Skipped where OpenVINO is not installed
(``pip install 'etspec[openvino]'``)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("openvino")

from helpers import random_prompts
from test_cpp_runner import _cpp, _python

from etspec.contract import KV_STRATEGIES, OPENVINO_PRECISION_ENV
from etspec.errors import EtspecError
from etspec.export.export_draft import DraftExportOptions, export_draft
from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.program import PteProgram
from etspec.runtime.runner import load_runners
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.tools.validate import validate

VOCAB = 16  # llama_small_vocab


@dataclass
class OpenvinoPair:
    target: Path
    draft: Path
    xnnpack_target: Path  # the same checkpoint, XNNPACK fp32


@pytest.fixture(scope="module")
def pair(artifacts, tmp_path_factory: pytest.TempPathFactory) -> OpenvinoPair:  # type: ignore[no-untyped-def]
    """The 16-token pair, lowered to OpenVINO: two verify widths, a 4-node draft step."""
    xnnpack = artifacts.small_draft()
    out = tmp_path_factory.mktemp("openvino")
    opts = TargetExportOptions(
        backend="openvino", max_seq=64, prefill_chunk=8, verify_width=8, narrow_verify_widths=(4,)
    )
    export_target(xnnpack.target.checkpoint, out / "target.pte", opts)
    export_draft(
        xnnpack.checkpoint, out / "target.pte", out / "draft.pte",
        DraftExportOptions(backend="openvino", step_width=4),
    )  # fmt: skip
    return OpenvinoPair(out / "target.pte", out / "draft.pte", xnnpack.target.pte)


PROMPTS = random_prompts(6, VOCAB, 20, seed=41)


def test_metadata_names_the_backend_and_both_kv_strategies(pair: OpenvinoPair) -> None:
    meta = PteProgram.load(pair.target, expect="target").metadata
    assert (meta.backend, meta.dtype) == ("openvino", "fp32")
    assert meta.kv_strategies.split(",") == list(KV_STRATEGIES)


def test_target_only_greedy_equals_the_xnnpack_fp32_export(pair: OpenvinoPair) -> None:
    for i, prompt in enumerate(PROMPTS):
        budget = 10 + 5 * i
        got = _python(pair.target, None, prompt, budget, "target-only", KV_STRATEGIES[0])
        want = _python(pair.xnnpack_target, None, prompt, budget, "target-only", KV_STRATEGIES[0])
        assert got.token_ids == want.token_ids, i


@pytest.mark.parametrize("kv", KV_STRATEGIES)
@pytest.mark.parametrize("tree", ["chain", "static", "dynamic"])
def test_speculative_greedy_equals_target_only(pair: OpenvinoPair, tree: str, kv: str) -> None:
    spec = RunnerSpec(pair.target, pair.draft, tree=TreeSettings(tree), kv_strategy=kv)
    base, speculative = load_runners(spec)
    assert speculative is not None
    results = list(validate(base, speculative, PROMPTS, max_new_tokens=24, ignore_eos=True))
    assert [(r.passed, r.tie) for r in results] == [(True, False)] * len(PROMPTS)
    assert sum(r.tpc for r in results) > len(PROMPTS)  # the draft's tokens were accepted


@pytest.mark.parametrize("kv", KV_STRATEGIES)
def test_cpp_runner_gives_python_s_ids(pair: OpenvinoPair, runner_bin: Path, kv: str) -> None:
    for i, prompt in enumerate(PROMPTS[:3]):
        budget = 12 + 6 * i
        ref = _python(pair.target, pair.draft, prompt, budget, "chain", kv)
        args = ["--max-new-tokens", str(budget), "--ignore-eos", "--draft", str(pair.draft)]
        args += ["--tree", "chain", "--num-spec-tokens", "3", "--kv", kv]
        (out,) = _cpp(runner_bin, pair.target, prompt, *args)
        assert out["token_ids"] == ref.token_ids, (kv, i)


def test_unknown_precision_is_refused(pair: OpenvinoPair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPENVINO_PRECISION_ENV, "fp16")
    with pytest.raises(EtspecError, match="unknown ETSPEC_OPENVINO_PRECISION 'fp16'; choose"):
        PteProgram.load(pair.target, expect="target")


def _cpu_has_bf16() -> bool:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


@pytest.mark.skipif(not _cpu_has_bf16(), reason="OpenVINO computes in fp32 on this CPU anyway")
def test_fp32_artifact_refused_where_openvino_already_runs_bf16(pair: OpenvinoPair) -> None:
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}
    env.pop(OPENVINO_PRECISION_ENV, None)
    args = ["generate", "--target", str(pair.target), "--prompt-ids", "1,2"]
    res = subprocess.run(
        [sys.executable, "-m", "etspec", *args], capture_output=True, text=True, env=env
    )
    assert res.returncode == 1, res.stdout + res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "OpenVINO already computes in bf16 in this process" in line
    assert "ETSPEC_OPENVINO_PRECISION=bf16" in line
