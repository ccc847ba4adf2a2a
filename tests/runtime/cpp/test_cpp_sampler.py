"""The C++ runner's sampler (runtime/cpp/src/sampler.cpp) against the Python one
(runtime/sampling.py): the same distribution for every row and setting, at a Gemma-sized
vocabulary, where both take their fast paths (a vectorized exp, threshold sets for top-p, a
heap for top-k). The draws themselves come from different random streams; the runner's
chi-square test (tests/runtime/cpp/test_cpp_runner.py) checks them end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from etspec.runtime.sampling import Sampler, SamplingConfig, SamplingError

VOCAB = 262_144
SETTINGS = [(0.8, 0, 0.95), (0.8, 40, 1.0), (0.6, 0, 0.9), (1.0, 40, 0.95), (1.3, 0, 0.5),
            (0.8, 0, 1.0), (2.0, 2000, 1.0)]  # fmt: skip


@pytest.fixture(scope="module")
def rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    out = [torch.randn(VOCAB, generator=g) * scale for scale in (1.0, 4.0, 12.0)]
    out.append(torch.randn(VOCAB, generator=g).round())  # ties
    tail = torch.full((VOCAB,), -40.0)
    tail[[7, 99, 5000]] = torch.tensor([3.0, 2.5, float("-inf")])
    out.append(tail)
    nan = torch.zeros(VOCAB)
    nan[123] = float("nan")
    out.append(nan)
    return torch.stack(out)


def _cpp(tool: Path, rows: torch.Tensor, tmp: Path, t: float, k: int, p: float) -> list:  # type: ignore[type-arg]
    path = tmp / "logits.f32"
    path.write_bytes(rows.numpy().astype(np.float32).tobytes())
    args = [str(tool), str(path), str(len(rows)), str(VOCAB), repr(t), str(k), repr(p)]
    res = subprocess.run(args, capture_output=True, text=True, check=True)
    out = []
    for line in res.stdout.splitlines():
        if line.startswith("error:"):
            out.append(line)
            continue
        dense = torch.zeros(VOCAB, dtype=torch.float64)
        for item in line.split()[1:]:
            i, v = item.split(":")
            dense[int(i)] = float(v)
        out.append(dense)
    return out


@pytest.mark.parametrize("t, k, p", SETTINGS)
def test_cpp_sampler_distribution_equals_python(  # type: ignore[no-untyped-def]
    runner_bin: Path, rows: torch.Tensor, tmp_path: Path, t: float, k: int, p: float
) -> None:
    got = _cpp(runner_bin.parent / "etspec_sample", rows, tmp_path, t, k, p)
    sampler = Sampler(SamplingConfig(t, k, p))
    for row, cpp in zip(rows, got, strict=True):
        if bool(torch.isnan(row).any()):
            assert cpp == "error: " + _python_error(sampler, row)
            continue
        py = sampler.dist(row).dense(VOCAB)
        # Float rounding may move one token across the top-p boundary; nothing else moves.
        moved = (cpp > 0) != (py > 0)
        assert int(moved.sum()) <= 1
        assert float(0.5 * (cpp - py).abs().sum()) < 1e-5


def _python_error(sampler: Sampler, row: torch.Tensor) -> str:
    with pytest.raises(SamplingError) as err:
        sampler.dist(row)
    return str(err.value)
