"""User errors: one line, non-zero exit, no traceback, no partial or overwritten files."""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_one_line_error
from tiny import make_hf_target

from etspec.artifact import open_artifact
from etspec.cli import main
from etspec.errors import EtspecError, ExportError
from etspec.export.export_target import TargetExportOptions, export_target


def run_cli(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(main, list(args))
    return result


def test_missing_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "t.pte"
    r = run_cli("export", "target", str(tmp_path / "nope"), "-o", str(out))
    assert_one_line_error(r, "no such directory")
    assert not out.exists()


def test_folder_without_config_is_not_hf(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    r = run_cli("export", "target", str(tmp_path / "ckpt"), "-o", str(tmp_path / "t.pte"))
    assert_one_line_error(r, "not a Hugging Face checkpoint folder", "config.json")


def test_unsupported_architecture(tmp_path: Path) -> None:
    ckpt = tmp_path / "gpt2"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 10}))
    r = run_cli("export", "target", str(ckpt), "-o", str(tmp_path / "t.pte"))
    assert_one_line_error(r, "model_type 'gpt2' is not supported", "llama")


def test_unsupported_rope_type(tmp_path: Path) -> None:
    ckpt = tmp_path / "yarn"
    make_hf_target("llama_gqa_rope3", ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0}
    (ckpt / "config.json").write_text(json.dumps(cfg))
    r = run_cli("export", "target", str(ckpt), "-o", str(tmp_path / "t.pte"))
    assert_one_line_error(r, "rope_type 'yarn' is not supported")


def test_missing_weights(tmp_path: Path) -> None:
    ckpt = tmp_path / "noweights"
    make_hf_target("llama_gqa_rope3", ckpt)
    (ckpt / "model.safetensors").unlink()
    r = run_cli("export", "target", str(ckpt), "-o", str(tmp_path / "t.pte"))
    assert_one_line_error(r, "has no weights")


def test_inspect_rejects_foreign_and_missing_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"not a program" * 10)
    assert_one_line_error(run_cli("inspect", str(junk)), "not an ExecuTorch .pte file")
    assert_one_line_error(run_cli("inspect", str(tmp_path / "gone.pte")), "no such file")
    truncated = tmp_path / "short.pte"
    truncated.write_bytes(b"\x1c\x00\x00\x00ET12")
    assert_one_line_error(run_cli("inspect", str(truncated)), "not an ExecuTorch .pte file")


def test_inspect_rejects_a_program_without_etspec_metadata(tmp_path: Path) -> None:
    import torch

    from etspec.export.lowering import lower

    class Plus(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x + 1

    pte = tmp_path / "foreign.pte"
    pte.write_bytes(lower({"forward": (Plus(), (torch.zeros(2),), None)}, {}, "portable", "t"))
    assert_one_line_error(run_cli("inspect", str(pte)), "not an etspec artifact")


def test_inspect_prints_methods_and_metadata(artifacts) -> None:
    case = artifacts.target("qwen2_bias")
    r = run_cli("inspect", "--json", str(case.pte))
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert {"target_prefill", "target_decode", "target_verify", "target_commit"} <= set(
        info["methods"]
    )
    meta = info["metadata"]
    assert meta["artifact_kind"] == "target" and meta["model_family"] == "qwen2"
    assert meta["hidden_size"] == 48 and meta["num_layers"] == 5
    assert meta["hidden_state_layers"] == [2, 2, 2]
    text = run_cli("inspect", str(case.pte))
    assert text.exit_code == 0 and "verify_width: 4" in text.output


def test_existing_output_is_not_overwritten(artifacts, tmp_path: Path) -> None:
    case = artifacts.target("qwen2_bias")
    out = tmp_path / "mine.pte"
    out.write_bytes(b"user data")
    r = run_cli("export", "target", str(case.checkpoint), "-o", str(out), "--backend", "portable")
    assert_one_line_error(r, "already exists", "--force")
    assert out.read_bytes() == b"user data"


def test_failed_export_leaves_no_partial_file(artifacts, tmp_path: Path, monkeypatch) -> None:
    case = artifacts.target("qwen2_bias")

    def boom(program, f):  # type: ignore[no-untyped-def]
        f.write(b"the first bytes of a program")  # a failure half-way through writing
        raise ExportError("serialization failed on purpose")

    # etspec.export re-exports the module's functions under its name; patch the module.
    module = importlib.import_module("etspec.export.lowering")
    monkeypatch.setattr(module, "_write_sealed", boom)
    out = tmp_path / "t.pte"
    with pytest.raises(ExportError):
        export_target(case.checkpoint, out, TargetExportOptions(backend="portable", max_seq=32))
    assert list(tmp_path.iterdir()) == []


def test_interrupted_write_leaves_no_partial_file(tmp_path: Path, monkeypatch) -> None:
    from etspec import files

    def broken_replace(src, dst):  # type: ignore[no-untyped-def]
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError):
        files.write_atomically(tmp_path / "x.pte", b"data")
    assert list(tmp_path.iterdir()) == []


def test_written_artifact_gets_the_usual_file_mode(tmp_path: Path) -> None:
    import os

    from etspec import files

    old = os.umask(0o022)
    try:
        files.write_atomically(tmp_path / "x.pte", b"data")
    finally:
        os.umask(old)
    assert (tmp_path / "x.pte").stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600


def test_replaced_file_keeps_its_mode_and_a_racing_writer_loses(tmp_path: Path) -> None:
    """--force over a 0600 file leaves 0600; without --force, a file another process created
    at the path while this one wrote is kept, and this write is refused (two concurrent
    exports to one path cannot both succeed)."""
    from etspec import files
    from etspec.errors import OutputExistsError

    private = tmp_path / "p.pte"
    private.write_bytes(b"old")
    private.chmod(0o600)
    files.write_atomically(private, b"new")
    assert private.read_bytes() == b"new" and private.stat().st_mode & 0o777 == 0o600
    raced = tmp_path / "r.pte"

    def other_process_wins(f) -> None:  # type: ignore[no-untyped-def]
        raced.write_bytes(b"theirs")
        f.write(b"ours")

    with pytest.raises(OutputExistsError, match="created by another process"):
        files.write_atomically(raced, other_process_wins, replace=False)
    assert raced.read_bytes() == b"theirs" and sorted(tmp_path.iterdir()) == [private, raced]


def test_an_output_that_is_an_input_is_refused_even_with_force(tmp_path: Path) -> None:
    from etspec.errors import EtspecError
    from etspec.files import check_output

    target = tmp_path / "target.pte"
    target.write_bytes(b"t")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"w")
    for out, inputs in ((target, (None, target)), (ckpt / "model.safetensors", (ckpt,))):
        with pytest.raises(EtspecError, match="is an input of this command"):
            check_output(out, True, inputs=inputs)
    assert check_output(ckpt / "t.pte", True, inputs=(ckpt,)) == ckpt / "t.pte"


def test_bad_export_options(tmp_path: Path) -> None:
    r = run_cli(
        "export",
        "target",
        str(tmp_path),
        "-o",
        str(tmp_path / "t.pte"),
        "--backend",
        "portable",
        "--dtype",
        "8da4w",
    )
    assert_one_line_error(r, "8da4w needs --backend xnnpack")
    tiny = ["--max-seq", "1", "--prefill-chunk", "1", "--verify-width", "1"]
    r = run_cli("export", "target", str(tmp_path), "-o", str(tmp_path / "t.pte"), *tiny)
    assert_one_line_error(r, "a context of 1 tokens is too short to export; use --max-seq 8")
    r = run_cli("export", "draft", str(tmp_path), "--target", str(tmp_path / "t.pte"), "-o",
                str(tmp_path / "d.pte"), "--scratch", "1000000000")  # fmt: skip
    assert_one_line_error(r, "--scratch and --step-width must be at most 4096")


def test_cli_process_exit_code_and_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "etspec", "inspect", str(tmp_path / "missing.pte")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'missing.pte'}: no such file"
    )


def test_tokenizer_travels_inside_the_target(artifacts) -> None:
    case = artifacts.target("mistral_tied")
    art = open_artifact(case.pte)
    data = (case.checkpoint / "tokenizer.json").read_bytes()
    assert art.tokenizer_json() == data
    assert art.metadata.tokenizer_sha256 == hashlib.sha256(data).hexdigest()
    assert open_artifact(artifacts.target("qwen2_bias").pte).tokenizer_json() is None
    info = json.loads(run_cli("inspect", "--json", str(case.pte)).output)
    assert info["has_tokenizer"] is True


@pytest.mark.parametrize("penalty", ["0", "-1.5", "nan", "inf"])
def test_repetition_penalty_out_of_range_is_refused_before_loading(
    tmp_path: Path, penalty: str
) -> None:
    # Not a .pte: had anything loaded first, the error would be about the file.
    bogus = tmp_path / "t.pte"
    bogus.write_bytes(b"not a program")
    r = run_cli("generate", "--target", str(bogus), "--prompt-ids", "1,2",
                "--repetition-penalty", penalty)  # fmt: skip
    assert_one_line_error(r, "repetition penalty must be a finite number > 0", penalty)
    from etspec.runtime.sampling import RepetitionPenalty, SamplingError

    with pytest.raises(SamplingError, match="repetition penalty"):
        RepetitionPenalty(float(penalty))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["bench", "--target", "t.pte", "--num-prompts", "-1"], "--num-prompts"),
        (["bench", "--target", "t.pte", "--num-prompts", "0"], "--num-prompts"),
        (["validate", "--target", "t.pte", "--max-new-tokens", "0"], "--max-new-tokens"),
        ([], "no command given; one of bench, "),
        (["export"], "no command given; one of draft, target (see `"),
        (["generate", "--target", "t.pte", "--prompt-ids", "1;"], "got '1;'"),
    ],
)
def test_counts_below_one_and_a_bare_command_are_usage_errors(args: list[str], words: str) -> None:
    r = run_cli(*args)
    assert r.exit_code == 2, r.output
    lines = r.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc', RANK=None are not integers"),
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 without the RANK and MASTER_ADDR torchrun sets"),
        ({"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "x"}, "RANK 5 is outside WORLD_SIZE 2"),
    ],
)
def test_bench_refuses_a_broken_torchrun_environment(
    artifacts, env: dict[str, str], words: str, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    target = str(artifacts.target("llama_small_vocab").pte)
    assert_one_line_error(run_cli("bench", "--target", target, "--prompts", "open"), words)


def test_quality_json_output_is_checked_before_the_run(artifacts, tmp_path: Path) -> None:
    """Into a missing folder, onto a folder, over a file without --force, onto an input:
    refused before anything loads (the artifacts named do not even exist)."""
    kept = tmp_path / "kept.json"
    kept.write_text("mine")
    ref = tmp_path / "ref.pte"
    ref.write_bytes(b"x")
    for out, words in (
        (tmp_path / "no" / "q.json", "does not exist"),
        (tmp_path, "is a directory"),
        (kept, "already exists; pass --force"),
        (ref, "is an input of this command"),
    ):
        res = run_cli("quality", str(ref), str(tmp_path / "missing.pte"), "--json", str(out))
        assert_one_line_error(res, words)
    assert kept.read_text() == "mine"


def test_an_output_a_full_disk_refuses_is_one_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import errno

    from etspec import files

    def full(src, dst):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full)
    out = tmp_path / "q.json"
    with pytest.raises(EtspecError) as e:
        files.write_output(out, b"{}", "--json")
    assert str(e.value) == (
        f"cannot write {out} (No space left on device); nothing was written: free space or "
        "choose another --json"
    )
    assert list(tmp_path.iterdir()) == []
