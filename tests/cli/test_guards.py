"""The doors a careless path reaches: outputs that are inputs, unbounded files, unbounded
trees, GGUF counts past the file (docs/reliability.md)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_one_line_error

from etspec.cli import main
from etspec.errors import CheckpointError, EtspecError
from etspec.files import read_json, read_text


def run_cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_bench_never_writes_over_what_it_reads(tmp_path: Path) -> None:
    """`bench --json T.pte --force` wrote its report over the target it measured."""
    target, draft = tmp_path / "t.pte", tmp_path / "d.pte"
    target.write_bytes(b"target")
    draft.write_bytes(b"draft")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "x"}\n')
    before = [_digest(p) for p in (target, draft, prompts)]
    base = ["bench", "--target", str(target), "--draft", str(draft), "--force"]
    for extra in (
        ["--json", str(target)],
        ["--traces", str(draft)],
        ["--json", str(prompts), "--prompts", str(prompts)],
    ):
        assert_one_line_error(run_cli(*base, *extra), "is an input of this command")
    out = tmp_path / "r.json"
    assert_one_line_error(
        run_cli(*base, "--json", str(out), "--traces", str(out)), "both name", str(out)
    )
    assert [_digest(p) for p in (target, draft, prompts)] == before
    assert not out.exists()


@pytest.mark.parametrize("where", ["/dev/zero", "folder", "missing", "latin1"])
def test_every_reader_of_a_user_file_is_bounded(tmp_path: Path, where: str) -> None:
    """`--prompts /dev/zero` grew to 24 GB (bench), `plot /dev/zero` to 14 GB; a folder or
    a missing file gave tracebacks. Each is one line, before anything loads."""
    path = {"/dev/zero": Path("/dev/zero"), "folder": tmp_path, "missing": tmp_path / "no"}.get(
        where, tmp_path / "latin1.jsonl"
    )
    if where == "latin1":
        path.write_bytes(b'{"prompt": "caf\xe9"}\n')
    words = {
        "/dev/zero": "not a regular file",
        "folder": "is a folder",
        "missing": "no such",
        "latin1": "not UTF-8",
    }[where]
    fake = tmp_path / "t.pte"
    fake.write_bytes(b"t")
    for args in (
        ["bench", "--target", str(fake), "--prompts", str(path)],
        ["validate", "--target", str(fake), "--draft", str(fake), "--prompts", str(path)],
        ["plot", str(path), "--out", str(tmp_path / "plots")],
    ):
        res = run_cli(*args)
        if args[0] == "plot" and where in ("folder", "missing"):
            # click's own check of plot's REPORT argument: a usage error (exit 2).
            assert_one_line_error(res, "REPORT", code=2)
        else:
            assert_one_line_error(res, words)


def test_a_file_past_the_bound_or_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 1025)
    with pytest.raises(EtspecError, match="larger than 0 MiB"):
        read_text(big, "prompts file", limit=1024)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EtspecError, match="nested too deeply"):
        read_json(deep, "report")
    assert_one_line_error(run_cli("plot", str(deep), "--out", str(tmp_path / "p")), "not JSON")
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    assert_one_line_error(
        run_cli("plot", str(listed), "--out", str(tmp_path / "p")), "not an `etspec bench"
    )


def test_bench_refuses_counts_below_one() -> None:
    res = run_cli("bench", "--target", "t.pte", "--max-new-tokens", "0")
    assert res.exit_code == 2 and "Traceback" not in res.output


@pytest.mark.parametrize("shape", ["N999999999", "D30xBF30", "chain999", "dynamic-d3k4t99999"])
def test_bench_refuses_a_tree_the_target_cannot_hold_before_building_it(
    artifacts, shape: str
) -> None:
    """`bench --trees N999999999` reached 7.8 GB, `D30xBF30` 16.6 GB; generate refused them
    at once, and now bench does too, in the same words."""
    case = artifacts.target("mistral_tied")
    res = run_cli("bench", "--target", str(case.pte), "--trees", shape, "--num-prompts", "1")
    assert_one_line_error(res, f"--trees {shape}", "verify width")


def _gguf(kvs: bytes, n_kv: int, n_tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kvs


def _key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        # tokenizer.ggml.token_type: an int32 array claiming 2^40 elements, none present
        (_gguf(_key("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, 1 << 40), 1),
         "tokenizer.ggml.token_type"),
        # a string array claiming 2^62 strings
        (_gguf(_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1 << 62), 1),
         "more than the file's bytes"),
        # a key whose length runs past the end
        (_gguf(struct.pack("<Q", 1 << 50), 1), "metadata key 0"),
        # counts larger than the file
        (_gguf(b"", 1 << 60, 1 << 60), "more than its bytes"),
        (b"GGML" + bytes(20), "no GGUF magic"),
    ],
)  # fmt: skip
def test_gguf_counts_are_checked_against_the_file_before_the_reader_allocates(
    tmp_path: Path, data: bytes, words: str
) -> None:
    """A 120 KB GGUF whose token-type count was patched to 2^32-2^62 made `convert gguf` and
    `export target` grow ~180 MB/s inside the gguf package's reader."""
    from etspec.models.gguf_read import open_gguf

    path = tmp_path / "forged.gguf"
    path.write_bytes(data)
    with pytest.raises(CheckpointError, match=words):
        open_gguf(path)
    res = run_cli("convert", "gguf", str(path), "-o", str(tmp_path / "out"))
    assert_one_line_error(res, words)


def _text_kv(key: str, value: str) -> bytes:
    return _key(key) + struct.pack("<I", 8) + _key(value)


def _tensor_record(name: str) -> bytes:
    return _key(name) + struct.pack("<I", 2) + struct.pack("<QQ", 4, 4) + struct.pack("<IQ", 0, 0)


@pytest.mark.parametrize(
    ("arch", "blocks", "words"),
    [("gemma9", 1, "architecture 'gemma9' is not supported"), ("gemma3", 5, "block_count is 5")],
)
def test_gguf_architecture_and_block_count_are_checked_before_the_reader(
    tmp_path: Path, arch: str, blocks: int, words: str
) -> None:
    """The real Gemma GGUF with its architecture renamed was refused only after 20 s and
    920 MB; with a wrong block count after 32 s and 3 GB."""
    from etspec.models.gguf_read import open_gguf

    kvs = _text_kv("general.architecture", arch)
    kvs += _key(f"{arch}.block_count") + struct.pack("<II", 4, blocks)
    path = tmp_path / "model.gguf"
    path.write_bytes(_gguf(kvs + _tensor_record("blk.0.attn_q.weight"), 2, 1) + bytes(64))
    with pytest.raises(CheckpointError, match=words):
        open_gguf(path, ("gemma3", "llama"))


def test_force_never_replaces_a_device_or_a_fifo(tmp_path: Path) -> None:
    import os

    from etspec.files import check_output

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (Path("/dev/null"), fifo):
        with pytest.raises(EtspecError, match="not a regular file"):
            check_output(path, True, "--json")
    assert fifo.exists() and not fifo.is_file()


def test_output_that_cannot_be_written_is_one_line_and_exit_1(runner_bin: Path, artifacts) -> None:  # type: ignore[no-untyped-def]
    """Onto a full disk (or a closed pipe) the C++ runner exited 0 with the output lost; a
    generation's stats line is not printed above the error."""
    import subprocess

    from etspec.contract import message

    target = artifacts.small_draft().target.pte
    generate = ["--target", str(target), "--prompt-ids", "3,1,4", "--max-new-tokens", "4"]
    for args in (["--help"], generate):
        with open("/dev/full", "w") as full:
            res = subprocess.run([str(runner_bin), *args], stdout=full, stderr=subprocess.PIPE,
                                 text=True, timeout=300)  # fmt: skip
        assert res.returncode == 1, res.stderr
        assert res.stderr.strip().splitlines() == [f"error: {message('stdout_failed')}"], args


def test_python_output_that_cannot_be_written_is_one_line_and_exit_1() -> None:
    """Onto a full disk `etspec` printed OSError's traceback; now the C++ runner's line."""
    import subprocess
    import sys

    from etspec.contract import message

    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "etspec", "--version"], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines() == [f"error: {message('stdout_failed')}"]
