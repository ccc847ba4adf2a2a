"""The C++ runtime as a library: `cmake --install` gives a CMake package, and the example
app in runtime/cpp/examples builds against it with find_package(etspec) and generates the
text `etspec generate` gives."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from etspec.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def test_example_builds_against_the_installed_package_and_generates(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path
) -> None:
    import executorch

    prefix, build = tmp_path / "prefix", tmp_path / "example"
    _sh("cmake", "--install", str(runner_bin.parent), "--prefix", str(prefix))
    assert (prefix / "include/etspec/runner.h").is_file()
    assert (prefix / "lib/cmake/etspec/etspecConfig.cmake").is_file()
    sdk = Path(next(iter(executorch.__path__))) / "lib" / "cmake"
    example = ROOT / "runtime/cpp/examples"
    _sh("cmake", "-S", str(example), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix};{sdk}")
    _sh("cmake", "--build", str(build))
    pair = artifacts.bpe_text_pair()
    prompt = "def fib(n):\n    return"
    res = _sh(str(build / "etspec_example"), str(pair.target.pte), str(pair.pte), prompt)
    args = ["--target", str(pair.target.pte), "--draft", str(pair.pte), "--tree", "chain",
            "--num-spec-tokens", "3", "--max-new-tokens", "32", "--prompt", prompt]  # fmt: skip
    args.append("--json")
    want = json.loads(CliRunner().invoke(main, ["generate", *args]).stdout)
    assert res.stdout == want["text"] + "\n"
    assert res.stderr.startswith(f"\n[{want['stats']['generated_tokens']} tokens, TPC ")
    assert "executorch" not in res.stderr  # ExecuTorch's own log lines stay out
