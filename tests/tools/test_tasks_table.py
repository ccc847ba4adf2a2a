"""The default against the faster drafter alone and against the best fixed shape, per set
(tools/tasks_table.py)."""

from __future__ import annotations

from typing import Any

import pytest

from etspec.tools.tasks_table import against_alone, against_best_shape, table


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


def test_auto_is_paired_with_the_best_fixed_shape_of_its_drafter_per_runtime() -> None:
    """Over the runs qa/0 and qa/1 give chain2 1.5x and 1.1x, chain3 1.3x and 1.5x (mean 1.4,
    the best) and auto 1.4x and 1.4x: 1.0 of chain3; another drafter's shape is no rival."""
    runs = [
        _run({"target-only": [100, 100], "combined auto": [150, 140],
              "combined chain2": [160, 100], "combined chain3": [120, 160],
              "eagle3 chain9": [900, 900], "cpp target-only": [100, 100],
              "cpp combined auto": [100, 100], "cpp combined chain3": [120, 120]}),
        _run({"target-only": [100, 100], "combined auto": [130, 140],
              "combined chain2": [140, 120], "combined chain3": [140, 140],
              "eagle3 chain9": [900, 900], "cpp target-only": [100, 100],
              "cpp combined auto": [110, 110], "cpp combined chain3": [110, 110]}),
    ]  # fmt: skip
    got = against_best_shape(runs)
    qa = got["python"]["qa"]
    assert qa["best_shape"] == "combined chain3" and qa["prompts"] == 2
    assert qa["best_speedup"] == pytest.approx(1.4) and qa["ratio"] == pytest.approx(1.0)
    # Differences auto - chain3: 0.1 and -0.1 per prompt.
    assert qa["t"] == pytest.approx(0.0)
    # Run by run over every prompt: 1.45 / 1.4 (chain3), then 1.35 / 1.4 (chain3).
    runs_all = got["python"]["all"]["per_run"]
    assert [r["best"] for r in runs_all] == ["combined chain3", "combined chain3"]
    assert [r["ratio"] for r in runs_all] == pytest.approx([1.45 / 1.4, 1.35 / 1.4])
    cpp = got["cpp"]["all"]
    assert cpp["best_shape"] == "combined chain3" and cpp["ratio"] == pytest.approx(1.05 / 1.15)


def test_runs_without_fixed_shapes_have_no_best_shape_table() -> None:
    run = _run({"target-only": [100, 100], "combined auto": [150, 150],
                "prompt-lookup auto": [140, 140], "eagle3 auto": [100, 100]})  # fmt: skip
    assert against_best_shape([run]) == {}
