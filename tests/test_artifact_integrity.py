"""Damaged artifacts: every truncated, bit-flipped, overwritten or extended copy of a real
``.pte`` is rejected by the Python runtime and the C++ runner before ExecuTorch parses it,
with the same one-line message, a non-zero exit and no crash. Without the integrity trailer
a flipped weight byte loaded silently and some header flips crashed ExecuTorch's loader."""

from __future__ import annotations

import hashlib
import random
import subprocess
from pathlib import Path

import pytest
import torch

from etspec.artifact import check_artifact, open_artifact, seal
from etspec.contract import TRAILER_SIZE
from etspec.errors import ArtifactError
from etspec.export.lowering import lower

# Cases per damage kind; 240 variants of the target, 60 of the draft.
TRUNCATIONS = 70
BIT_FLIPS = 110
OVERWRITES = 40
EXTENSIONS = 20


def _variants(data: bytes, seed: int, scale: float = 1.0) -> list[tuple[str, bytes]]:
    """Damaged copies of ``data``, spread over header, flatbuffer, segments and trailer."""
    rng = random.Random(seed)
    n = len(data)
    # Flips concentrate where structure lives (headers, trailer) as well as anywhere.
    regions = [(0, 64), (64, 4096), (0, n), (n - TRAILER_SIZE, n)]
    out = []
    cuts = {0, 1, 7, 63, 64, n - TRAILER_SIZE, n - TRAILER_SIZE + 1, n - 1}
    while len(cuts) < int(TRUNCATIONS * scale):
        cuts.add(rng.randrange(n))
    out += [(f"truncate to {c}", data[:c]) for c in sorted(cuts)]
    for i in range(int(BIT_FLIPS * scale)):
        lo, hi = regions[i % len(regions)]
        at, bit = rng.randrange(lo, hi), rng.randrange(8)
        flipped = bytearray(data)
        flipped[at] ^= 1 << bit
        out.append((f"flip bit {bit} of byte {at}", bytes(flipped)))
    for _ in range(int(OVERWRITES * scale)):
        at, size = rng.randrange(n), rng.randrange(1, 256)
        junk = bytes(rng.randrange(256) for _ in range(size))
        changed = (data[:at] + junk + data[at + size :])[:n]
        if changed != data:
            out.append((f"overwrite {size} bytes at {at}", changed))
    for _ in range(int(EXTENSIONS * scale)):
        extra = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096)))
        out.append((f"append {len(extra)} bytes", data + extra))
    return out


def _python_error(path: Path, kind: str) -> str:
    with pytest.raises(ArtifactError) as e:
        open_artifact(path, kind)
    return str(e.value)


def test_export_seals_the_program_with_its_sha256(artifacts) -> None:  # type: ignore[no-untyped-def]
    data = artifacts.small_draft().target.pte.read_bytes()
    program, digest = data[:-TRAILER_SIZE], data[-TRAILER_SIZE:][:32]
    assert hashlib.sha256(program).digest() == digest
    assert seal(program) == data


@pytest.mark.parametrize("kind", ["target", "draft"])
def test_every_damaged_copy_is_rejected_in_python_and_cpp(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path, kind: str
) -> None:
    pair = artifacts.small_draft()
    original = pair.target.pte if kind == "target" else pair.pte
    variants = _variants(original.read_bytes(), seed=7, scale=1.0 if kind == "target" else 0.25)
    assert len(variants) >= (200 if kind == "target" else 50)
    path = tmp_path / f"damaged-{kind}.pte"
    kinds: dict[str, int] = {}
    for label, data in variants:
        path.write_bytes(data)
        expected = _python_error(path, kind)
        assert "\n" not in expected, label
        check = expected.split(": ", 1)[1].split(" (")[0]
        kinds[check] = kinds.get(check, 0) + 1
        target = path if kind == "target" else pair.target.pte
        args = ["--target", str(target), "--prompt-ids", "1,2", "--max-new-tokens", "2"]
        if kind == "draft":
            args += ["--draft", str(path)]
        res = subprocess.run([str(runner_bin), *args], capture_output=True, timeout=60)
        stderr = res.stderr.decode(errors="replace")
        # A negative code is a signal (a crash); 1 is the runner's error exit.
        assert res.returncode == 1, (label, res.returncode, stderr)
        assert stderr.splitlines() == [f"error: {expected}"], label
    # The checks that fire are the specific ones, not one catch-all.
    assert {"truncated", "damaged", "not an ExecuTorch .pte file"} <= set(kinds), kinds


def test_a_foreign_program_without_trailer_is_refused(  # type: ignore[no-untyped-def]
    runner_bin: Path, tmp_path: Path
) -> None:
    class Plus(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    sealed = lower({"forward": (Plus(), (torch.zeros(2),), None)}, {}, "portable", "t")
    foreign = tmp_path / "foreign.pte"
    foreign.write_bytes(sealed[:-TRAILER_SIZE])  # what plain ExecuTorch export writes
    message = _python_error(foreign, "target")
    assert "no integrity trailer" in message and "etspec export" in message
    res = subprocess.run(
        [str(runner_bin), "--target", str(foreign), "--prompt-ids", "1"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1 and res.stderr.splitlines() == [f"error: {message}"]
    # Sealed but without etspec metadata: the trailer passes, the metadata check names it.
    foreign.write_bytes(sealed)
    check_artifact(foreign)
    assert "no etspec metadata" in _python_error(foreign, "target")


def test_portable_sha256_matches_hashlib(runner_bin: Path, tmp_path: Path) -> None:
    """The C++ fallback used where OpenSSL is absent (devices), at every padding boundary."""
    rng = random.Random(0)
    sizes = [*range(0, 130), 1 << 16, (1 << 16) + 63, 3 * (1 << 20) + 5]
    tool = runner_bin.parent / "etspec_sha256sum"
    for size in sizes:
        data = rng.randbytes(size)
        f = tmp_path / "data.bin"
        f.write_bytes(data)
        out = subprocess.run([str(tool), str(f)], capture_output=True, text=True, check=True)
        assert out.stdout.split()[0] == hashlib.sha256(data).hexdigest(), size


def test_a_huge_file_that_is_no_artifact_is_refused_before_any_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2 GB sparse file (no ExecuTorch header): refused from its first bytes; the snapshot
    copy (memfd or whole read) never starts."""
    big = tmp_path / "disk.img"
    with big.open("wb") as f:
        f.truncate(2 << 30)

    def no_copy(*args: object) -> None:
        raise AssertionError("the file was copied before its header was checked")

    monkeypatch.setattr("etspec.artifact.shutil.copyfileobj", no_copy)
    monkeypatch.setattr(Path, "read_bytes", no_copy)
    with pytest.raises(ArtifactError, match=r"not an ExecuTorch \.pte file"):
        open_artifact(big)
