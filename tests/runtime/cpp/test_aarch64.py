"""The C++ runtime cross-compiled for arm64 Linux (`build.sh --arch aarch64`) and run under
qemu-user (`qemu.sh`): the same .pte files give target-only's tokens speculatively in every
tree mode and both KV strategies, and the x86 runner's tokens and text. Slow (a cross build,
then emulation): `pytest -m slow`; skipped without the cross compiler and qemu."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "3,1,4,1,5,9,2,6"
MODES = [("chain", kv) for kv in ("position-overwrite", "scratch-commit")] + [
    (mode, kv) for mode in ("static", "dynamic", "auto")
    for kv in ("position-overwrite", "scratch-commit")
]  # fmt: skip


@pytest.fixture(scope="module")
def arm_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool, package in (("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"),
                          ("qemu-aarch64-static", "qemu-user-static")):  # fmt: skip
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}: apt-get install {package}")
    build = tmp_path_factory.mktemp("cpp-aarch64")
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(ROOT / "runtime/cpp/build.sh"), "--arch", "aarch64",
                          str(build)], capture_output=True, text=True, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    binary = build / "etspec_runner"
    kind = subprocess.run(["file", str(binary)], capture_output=True, text=True).stdout
    assert "ARM aarch64" in kind, kind
    return binary


def _ids(command: list[str]) -> list[int]:
    out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return [int(t) for t in out.stdout.split()]


def _run(binary: Path, target: Path, *args: str, qemu: bool = True) -> list[int]:
    cmd = [str(binary), "--target", str(target), "--prompt-ids", PROMPT, "--print-ids",
           "--max-new-tokens", "24", "--ignore-eos", *args]  # fmt: skip
    return _ids(["bash", str(ROOT / "runtime/cpp/qemu.sh"), *cmd] if qemu else cmd)


def test_arm64_speculation_is_target_only_and_x86_s(arm_bin, runner_bin, artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    want = _run(runner_bin, pair.target.pte, qemu=False)
    assert _run(arm_bin, pair.target.pte) == want
    for mode, kv in MODES:
        args = ("--draft", str(pair.pte), "--tree", mode, "--kv", kv, "--num-spec-tokens", "4")
        assert _run(arm_bin, pair.target.pte, *args) == want, (mode, kv)


def test_arm64_text_through_the_built_in_tokenizer(arm_bin, runner_bin, artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.bpe_text_pair()
    cmd = ["--target", str(pair.target.pte), "--draft", str(pair.pte), "--prompt",
           "def fib(n):", "--max-new-tokens", "16", "--ignore-eos"]  # fmt: skip
    x86 = subprocess.run([str(runner_bin), *cmd], capture_output=True, text=True)
    arm = subprocess.run(["bash", str(ROOT / "runtime/cpp/qemu.sh"), str(arm_bin), *cmd],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert x86.returncode == 0 and arm.returncode == 0, arm.stderr
    assert arm.stdout == x86.stdout and arm.stdout.strip()


def test_the_bundled_pair_on_arm64(arm_bin, runner_bin) -> None:  # type: ignore[no-untyped-def]
    """The bundled pair as scripts/export_bundled.sh exports it (skipped before it has run)."""
    target, draft = ROOT / ".etspec-cache/target.pte", ROOT / ".etspec-cache/draft.pte"
    if not (target.is_file() and draft.is_file()):
        pytest.skip("no bundled pair: bash scripts/export_bundled.sh exports it")
    want = _run(runner_bin, target, qemu=False)
    assert _run(arm_bin, target) == want
    for mode, kv in MODES:
        args = ("--draft", str(draft), "--tree", mode, "--kv", kv)
        assert _run(arm_bin, target, *args) == want, (mode, kv)


@pytest.mark.real
def test_gemma3_270m_on_arm64_speculates_target_only_s_tokens(arm_bin) -> None:  # type: ignore[no-untyped-def]
    """The default Gemma 3 270M export and the shipped draft (scripts/main_job.sh exports
    both), drafting every step (EAGLE-3 chain3): 3 prompts, 32 tokens each."""
    exports = ROOT / ".etspec-cache/gemma-3-270m/exports"
    target, draft = exports / "target-default.pte", exports / "draft-shipped.pte"
    if not (target.is_file() and draft.is_file()):
        pytest.skip("no Gemma 3 270M exports: bash scripts/main_job.sh")
    prompts = ["Translate to French: The weather is lovely today.\nFrench:",
               "Q: Why is the sky blue?\nA:", "Write a haiku about autumn leaves."]  # fmt: skip
    lines = "".join(
        json.dumps({"prompt": p, "max_new_tokens": 32, "ignore_eos": True}) + "\n" for p in prompts
    )

    def serve(*args: str) -> list[list[int]]:
        cmd = ["bash", str(ROOT / "runtime/cpp/qemu.sh"), str(arm_bin), "--target", str(target),
               *args, "--serve"]  # fmt: skip
        out = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, out.stderr
        return [json.loads(line)["token_ids"] for line in out.stdout.splitlines()]

    speculative = serve("--draft", str(draft), "--draft-method", "eagle3", "--tree", "chain",
                        "--num-spec-tokens", "3")  # fmt: skip
    assert speculative == serve()
