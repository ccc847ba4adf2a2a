"""Two versions paired prompt by prompt (tools/paired.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from etspec.tools.paired import main, paired


def _run(
    target: list[float], default: list[float], texts: list[list[int]] | None = None
) -> dict[str, Any]:
    """One bench run on qa/0, qa/1 and math/0: tokens/s of target-only and the default."""
    ids = ["qa/0", "qa/1", "math/0"]
    texts = texts or [[1, 2, 3]] * 3

    def records(speeds: list[float]) -> list[dict[str, Any]]:
        return [
            {"prompt_id": p, "tokens_per_s": s, "token_ids": t}
            for p, s, t in zip(ids, speeds, texts, strict=True)
        ]

    return {"records": {"target-only": records(target), "combined auto": records(default)}}


def test_versions_are_compared_by_each_prompts_mean_log_speedup() -> None:
    base = [_run([100, 100, 100], [150, 200, 100]), _run([50, 100, 100], [75, 100, 100])]
    new = [_run([100, 100, 100], [150, 300, 80])]
    got = paired(base, new)
    # Log speedups per prompt: base qa/0 ln1.5 twice, qa/1 (ln2 + ln1)/2, math/0 0; new
    # ln1.5, ln3, ln0.8.
    d = [0.0, math.log(3) - math.log(2) / 2, math.log(0.8)]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    assert got["all"]["ratio"] == pytest.approx(math.exp(mean))
    assert got["all"]["t"] == pytest.approx(mean / (sd / math.sqrt(3)))
    assert got["sets"]["qa"]["ratio"] == pytest.approx(math.exp(d[1] / 2))
    # One prompt in a set: no spread, no t.
    assert got["sets"]["math"] == {"ratio": pytest.approx(0.8), "t": None, "sd": 0.0, "prompts": 1}
    assert got["base"]["least_prompt_mean"] == pytest.approx(1.0)
    assert got["new"]["least_prompt_mean"] == pytest.approx(0.8)
    assert got["new"]["below_0.95"] == 1 and got["base"]["below_0.95"] == 0
    assert got["same_text"] == 3


def test_a_prompt_whose_text_differs_anywhere_is_not_counted_as_one_text() -> None:
    # Unseeded: qa/1's text differs between the versions' runs; math/0's target-only text
    # differs from the default's in the same run.
    base = [_run([100] * 3, [150] * 3, [[1], [1], [1]])]
    new = [_run([100] * 3, [150] * 3, [[1], [2], [1]])]
    new[0]["records"]["target-only"][2]["token_ids"] = [9]
    assert paired(base, new)["same_text"] == 1


def test_a_system_not_in_the_runs_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(click.ClickException, match="no 'cpp combined auto' records"):
        paired([_run([1] * 3, [1] * 3)], [_run([1] * 3, [1] * 3)], "cpp combined auto")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_run([100] * 3, [150] * 3)))
    b.write_text(json.dumps(_run([100] * 3, [165] * 3)))
    out = tmp_path / "paired.json"
    res = CliRunner().invoke(main, ["--base", str(a), "--new", str(b), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "| new / base | 1.100 |" in res.output
    assert json.loads(out.read_text())["files"] == {"base": [str(a)], "new": [str(b)]}
