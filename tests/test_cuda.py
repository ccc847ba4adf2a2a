"""The eager reference program on a CUDA device: every speculative mode stays exact there.

Skipped without CUDA. ``scripts/gpu_reference_check.sh`` runs this module on a GPU machine
(with the bundled checkpoints and no ExecuTorch) and its recorded output is in
docs/results/bundled-reference-program-cuda-h200.txt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from etspec.cli import main

# ETSPEC_TEST_DEVICE=cpu runs the same checks on the CPU (how the module itself is tested).
DEVICE = os.environ.get("ETSPEC_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA GPU"
)

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "checkpoints" / "etspec-code-14m"
DRAFT = ROOT / "checkpoints" / "etspec-code-14m-eagle3"
REFERENCE = ["--target", str(TARGET), "--reference", "--device", DEVICE]


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
@pytest.mark.parametrize("tree", ["chain", "static", "dynamic", "auto"])
def test_validate_on_cuda(kv: str, tree: str) -> None:
    out = _run(["validate", *REFERENCE, "--draft", str(DRAFT), "--tree", tree, "--kv", kv])
    assert "20/20 prompts identical" in out, out


@pytest.mark.parametrize("tree", ["chain", "auto"])
def test_prompt_lookup_validates_on_cuda(tree: str) -> None:
    out = _run(["validate", *REFERENCE, "--draft-method", "prompt-lookup", "--tree", tree])
    assert "20/20 prompts identical" in out, out


def test_generate_compare_on_cuda() -> None:
    out = _run(["generate", *REFERENCE, "--draft", str(DRAFT), "--prompt", "def fib(n):",
                "--max-new-tokens", "48", "--compare"])  # fmt: skip
    assert "outputs identical" in out, out


def test_bench_on_cuda(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    _run(["bench", *REFERENCE, "--draft", str(DRAFT), "--prompts", "copy", "--num-prompts",
          "2", "--max-new-tokens", "32", "--json", str(report)])  # fmt: skip
    data = json.loads(report.read_text())
    assert data["manifest"]["torch"] == torch.__version__
    speculative = {k: v for k, v in data["summary"].items() if k != "target-only"}
    assert speculative
    for name, row in speculative.items():
        assert row["identical"] == row["prompts"] == 2, name
