"""Forged metadata behind a valid integrity trailer: every integer field of a tiny target and
draft set outside its contract range (``contract.TARGET_RANGES``, ``DRAFT_RANGES``), the
width lists out of order, the target's ``vocab_size`` unlike its logits, a field of the wrong
type. The trailer proves integrity, not sanity: before these checks `prefill_chunk 0` or
`vocab_size 10^9` crashed the C++ runner (its `--serve` server on the first request) and
gave Python tracebacks. Each is now refused at load, in one line, identically by Python,
`etspec inspect`, the C++ runner and `--serve`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_one_line_error

from etspec.artifact import open_artifact, seal
from etspec.contract import (
    DRAFT_RANGES,
    METADATA_WIDTHS,
    TARGET_RANGES,
    TRAILER_SIZE,
    Bound,
)
from etspec.errors import ArtifactError


def forge(data: bytes, field: str, values: list[Any]) -> bytes:
    """``data`` (a sealed .pte) with constant method ``field`` returning ``values``,
    re-serialized and sealed again."""
    from executorch.exir._serialize._program import (
        deserialize_pte_binary,
        serialize_pte_binary,
    )
    from executorch.exir.schema import Int, String

    pte = deserialize_pte_binary(data[:-TRAILER_SIZE])
    plan = next(p for p in pte.program.execution_plan if p.name == field)
    outputs = list(plan.outputs)
    assert len(outputs) >= len(values) > 0
    for index, value in zip(outputs, values, strict=False):
        plan.values[index].val = String(value) if isinstance(value, str) else Int(value)
    plan.outputs = outputs[: len(values)]
    return seal(bytes(serialize_pte_binary(pte, extract_delegate_segments=True)))


def _cases(meta: Any, ranges: dict[str, tuple[Bound, Bound]]) -> list[tuple[str, list[Any]]]:
    """(field, forged values): one below each range and one above, a list with one element
    out of range, widths out of order or short of their widest, a string for an integer."""

    def bound(b: Bound) -> int:
        return b if isinstance(b, int) else int(getattr(meta, b[0])) + b[1]

    out = []
    for name, (lo, hi) in ranges.items():
        value = getattr(meta, name)
        many = list(value) if isinstance(value, tuple) else None
        for bad in (bound(lo) - 1, bound(hi) + 1):
            out.append((name, [*many[:-1], bad] if many else [bad]))
    for name, _ in METADATA_WIDTHS:
        if hasattr(meta, name) and len(getattr(meta, name)) > 1:
            widths = list(getattr(meta, name))
            out.append((name, widths[::-1]))  # descending
            out.append((name, widths[:-1]))  # short of the widest
    out.append(("max_context", ["many"]))  # a string where an integer belongs
    return out


def _cpp(runner_bin: Path, target: Path, draft: Path | None, serve: bool) -> tuple[int, str]:
    args = [str(runner_bin), "--target", str(target), "--max-new-tokens", "2"]
    if draft is not None:
        args += ["--draft", str(draft)]
    args += ["--serve"] if serve else ["--prompt-ids", "1,2"]
    res = subprocess.run(args, capture_output=True, input=b'{"prompt_ids": [1, 2]}\n', timeout=60)
    return res.returncode, res.stderr.decode(errors="replace")


@pytest.mark.parametrize("kind", ["target", "draft"])
def test_forged_metadata_is_refused_identically_by_every_runtime(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path, kind: str
) -> None:
    pair = artifacts.small_draft()
    original = pair.target.pte if kind == "target" else pair.pte
    data = original.read_bytes()
    meta = open_artifact(original, kind).metadata
    cases = _cases(meta, TARGET_RANGES if kind == "target" else DRAFT_RANGES)
    if kind == "target":
        cases.append(("vocab_size", [meta.vocab_size - 1]))  # in range, unlike the logits
    assert len(cases) >= (30 if kind == "target" else 24)
    path = tmp_path / f"forged-{kind}.pte"
    for i, (field, values) in enumerate(cases):
        path.write_bytes(forge(data, field, values))
        with pytest.raises(ArtifactError) as e:
            open_artifact(path, kind)
        expected = str(e.value)
        assert "\n" not in expected and field in expected, (field, values, expected)
        target, draft = (path, None) if kind == "target" else (pair.target.pte, path)
        # --serve on every third case: the server refuses at start, as the runner does.
        code, stderr = _cpp(runner_bin, target, draft, serve=i % 3 == 0)
        assert code == 1, (field, values, code, stderr)  # a negative code: a crash
        assert stderr.splitlines() == [f"error: {expected}"], (field, values)


def test_an_unforged_copy_round_trips(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The forging itself changes nothing else: the same value written back loads."""
    pair = artifacts.small_draft()
    meta = open_artifact(pair.target.pte, "target").metadata
    path = tmp_path / "same.pte"
    path.write_bytes(forge(pair.target.pte.read_bytes(), "prefill_chunk", [meta.prefill_chunk]))
    assert open_artifact(path, "target").metadata == meta


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--tree", "static", "--static-tree", "N3"], "the N3 tree is not lossless"),
        (["--tree", "dynamic"], "tree is not lossless"),
        (["--kv", "scratch-commit"], "--kv scratch-commit is not lossless"),
    ],
)
def test_a_row_quantized_target_refuses_what_would_not_be_exact(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path, options: list[str], words: str
) -> None:
    """On a recipe with int8 activations a tree's rows (and scratch rows) attend in another
    column order than a decode and can flip a greedy token (contract.ROW_QUANTIZED_DTYPES):
    both runtimes refuse them in the same line; a chain and `auto` still run."""
    from click.testing import CliRunner

    from etspec.cli import main

    pair = artifacts.small_draft()
    target = tmp_path / "int8-activations.pte"
    target.write_bytes(forge(pair.target.pte.read_bytes(), "dtype", ["8da8w-e4"]))
    base = ["--target", str(target), "--draft", str(pair.pte), "--prompt-ids", "1,2",
            "--max-new-tokens", "2"]  # fmt: skip
    res = CliRunner().invoke(main, ["generate", *base, *options])
    assert_one_line_error(res, words, "--dtype fp32")
    cpp = subprocess.run([str(runner_bin), *base, *options], capture_output=True, timeout=60)
    assert cpp.returncode == 1
    assert cpp.stderr.decode().splitlines() == [ln for ln in res.output.splitlines() if ln]
    for fine in (["--tree", "chain"], ["--tree", "auto"]):
        assert CliRunner().invoke(main, ["generate", *base, *fine]).exit_code == 0
        subprocess.run([str(runner_bin), *base, *fine], capture_output=True, check=True)
