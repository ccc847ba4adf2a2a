"""The default against the faster drafter alone, per set (tools/tasks_table.py)."""

from __future__ import annotations

from typing import Any

import pytest

from etspec.tools.tasks_table import against_alone, table


def _run(speeds: dict[str, list[float]]) -> dict[str, Any]:
    """One bench run: each system's tokens/s on the prompts qa/0 and qa/1."""
    return {
        "records": {
            name: [{"prompt_id": f"qa/{i}", "tokens_per_s": s} for i, s in enumerate(values)]
            for name, values in speeds.items()
        }
    }


def test_the_default_is_paired_with_the_faster_drafter_alone_prompt_by_prompt() -> None:
    runs = [
        _run({"target-only": [100, 100], "combined auto": [170, 120],
              "prompt-lookup auto": [140, 140], "eagle3 auto": [100, 100]}),
        _run({"target-only": [100, 50], "combined auto": [150, 70],
              "prompt-lookup auto": [140, 70], "eagle3 auto": [100, 50]}),
    ]  # fmt: skip
    got = against_alone(runs)
    assert set(got) == {"python"}  # no C++ records, no C++ row
    qa = got["python"]["qa"]
    # Per prompt over the runs: the default 1.6 and 1.3, lookup alone 1.4 and 1.4.
    assert qa["faster_alone"] == "prompt-lookup auto" and qa["prompts"] == 2
    assert qa["ratio"] == pytest.approx(1.45 / 1.4)
    # Differences 0.2 and -0.1: mean 0.05, standard deviation 0.3 / sqrt(2).
    assert qa["t"] == pytest.approx(0.05 / (0.3 / 2**0.5 / 2**0.5))


def test_a_set_with_identical_differences_has_no_t() -> None:
    run = _run({"target-only": [100, 100], "combined auto": [150, 150],
                "prompt-lookup auto": [140, 140], "eagle3 auto": [100, 100]})  # fmt: skip
    assert against_alone([run])["python"]["qa"]["t"] is None


def test_a_prompt_is_judged_by_each_run_and_by_its_mean_over_the_runs() -> None:
    """qa/0 runs 0.9x then 1.3x: one run below 0.95x, but its mean over the runs is 1.1x;
    the least per-run figure and the least mean are both reported."""
    runs = [
        _run({"target-only": [100, 100], "target-only again": [90, 100]}),
        _run({"target-only": [100, 100], "target-only again": [130, 120]}),
    ]
    got = table(runs)["systems"]["target-only again"]
    assert got["least_prompt"] == pytest.approx(0.9) and got["below_0.95"] == 1
    assert got["least_prompt_mean"] == pytest.approx(1.1)
