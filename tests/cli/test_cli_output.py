"""What a user sees from a real `etspec` process (not click's in-process runner, which
cannot see what native code writes to file descriptor 2): export and generate print their
own lines only, errors stay one line, and --verbose shows what libraries logged."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from etspec.contract import DEPLOYMENT_DTYPE

PROMPT = "3,1,4,1,5,9"


def _etspec(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "etspec", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_export_prints_its_stages_and_no_warnings(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """torch.export's UserWarnings, torchao's and torch's import warnings: none by default.
    Off a terminal (here a pipe) stderr is a line at each stage's end, then the per-stage
    times: the profile of the run."""
    case = artifacts.target("llama_small_vocab")
    ckpt = tmp_path / "ckpt"
    shutil.copytree(case.checkpoint, ckpt)
    args = ["export", "target", ckpt, "-o", tmp_path / "t.pte", "--max-seq", "32",
            "--prefill-chunk", "8", "--verify-width", "4"]  # fmt: skip
    res = _etspec(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert all(line.startswith("export target -> t.pte: ") for line in lines), res.stderr
    stages = [line.split("; ", 1)[1].rsplit(" [", 1)[0] for line in lines[:-1]]
    assert lines[0].startswith("export target -> t.pte: read ckpt took ")
    assert stages == [
        f"quantize ({DEPLOYMENT_DTYPE})",
        "export target_prefill",
        "export target_decode",
        "export target_verify",
        "export target_commit",
        "export target_reset",
        "lower target_prefill to xnnpack",
        "lower target_decode to xnnpack",
        "lower target_verify to xnnpack",
        "lower target_commit to xnnpack",
        "lower target_reset to xnnpack",
        "finish lowering to xnnpack",
        "emit the program",
        "write t.pte",
    ], res.stderr
    done = r"export target -> t\.pte: done in \d+:\d\d \(read ckpt \d+\.\d s, .*\)"
    assert re.fullmatch(done, lines[-1]), lines[-1]
    assert res.stdout.startswith("wrote ") and len(res.stdout.splitlines()) == 1
    assert res.stdout.rstrip().endswith(f"xnnpack/{DEPLOYMENT_DTYPE})")  # the default recipe
    verbose = _etspec(*args, "--force", "--verbose", cwd=tmp_path)
    assert verbose.returncode == 0 and "[etspec.thirdparty]" in verbose.stderr


def test_generate_prints_only_its_stats_line(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ExecuTorch's CPU-probe lines at the first (XNNPACK) method load are not shown; the
    stderr of a speculative generate is exactly its stats line."""
    pair = artifacts.small_draft()  # XNNPACK target and draft
    args = ["generate", "--target", pair.target.pte, "--draft", pair.pte, "--prompt-ids",
            PROMPT, "--max-new-tokens", "8", "--ignore-eos"]  # fmt: skip
    res = _etspec(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith("[8 tokens, ") and "acceptance" in line, res.stderr
    verbose = _etspec(*args, "--verbose", cwd=tmp_path)
    assert "[etspec.thirdparty] [cpuinfo_utils.cpp" in verbose.stderr, verbose.stderr


def test_an_error_after_loading_is_the_only_stderr_line(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.small_draft()
    res = _etspec("generate", "--target", pair.target.pte, "--draft", pair.pte,
                  "--prompt-ids", "3,99", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        "error: prompt token id 99 is outside the vocabulary [0, 16)"
    ], res.stderr
