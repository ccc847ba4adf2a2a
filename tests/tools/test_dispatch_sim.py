"""scripts/dispatch_sim.py, run as a user runs it: the real dispatcher on synthetic requests,
the same figures for the same seed, and constants overridden by name."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_script

SMALL = ("--histories", 2, "--requests", 6, "--steps", 96)


def _sim(tmp_path: Path, name: str, *args: object) -> dict:  # type: ignore[type-arg]
    out = tmp_path / f"{name}.json"
    res = run_script("dispatch_sim", *SMALL, *args, "--json", out)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(out.read_text())


def test_a_draft_that_never_agrees_costs_at_most_its_probes_and_a_good_one_pays(
    tmp_path: Path,
) -> None:
    report = _sim(tmp_path, "a", "--scenarios", "zero,high")
    zero, high = report["scenarios"]["zero"], report["scenarios"]["high"]
    # A draft that agrees with nothing: every request within the probe share (1%) and
    # the opening credit of a decode-time, so 0.98 and above; never faster than a decode.
    assert 0.98 <= zero["speed_min"] <= zero["speed_mean"] <= 1.0
    assert zero["step_share"]["none"] > 0.98
    # At 0.55-0.8 a depth auto takes most of the best chain's gain, and no request is
    # slower than a decode by more than its probes.
    assert high["speed_mean"] > 1.3 and high["capture_mean"] > 0.8
    assert high["speed_min"] >= 0.95 and high["below_0_95"] == 0
    assert len(high["speeds"]) == high["requests"] == 12


def test_the_same_seed_gives_the_same_figures_and_constants_are_overridden(
    tmp_path: Path,
) -> None:
    a = _sim(tmp_path, "a", "--scenarios", "mixed")
    b = _sim(tmp_path, "b", "--scenarios", "mixed")
    assert a == b
    # Without a probe budget the dispatcher chooses otherwise on the same requests.
    c = _sim(tmp_path, "c", "--scenarios", "mixed", "--set", "AUTO_PROBE_SHARE=0")
    assert c["overrides"] == {"AUTO_PROBE_SHARE": 0.0}
    assert c["scenarios"]["mixed"]["speeds"] != a["scenarios"]["mixed"]["speeds"]


def test_an_unknown_constant_or_scenario_is_a_one_line_error() -> None:
    res = run_script("dispatch_sim", *SMALL, "--set", "AUTO_NOPE=1")
    assert res.returncode == 2 and "AUTO_NOPE=1" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_script("dispatch_sim", *SMALL, "--scenarios", "busy")
    assert res.returncode == 2 and "unknown scenario 'busy'" in res.stderr


def test_calls_priced_for_another_machine_and_the_drafts_catch_up(tmp_path: Path) -> None:
    """A dearer verify leaves less of a good draft's gain; a catch-up over the prompt on
    each request's first draft step costs a draft that never agrees that much more."""
    base = _sim(tmp_path, "a", "--scenarios", "zero,high")
    dear = _sim(tmp_path, "b", "--scenarios", "zero,high", "--verify-costs", "1.5,2.2,2.9")
    assert dear["settings"]["verify_costs"] == [1.5, 2.2, 2.9]
    assert dear["scenarios"]["high"]["speed_mean"] < base["scenarios"]["high"]["speed_mean"]
    caught = _sim(tmp_path, "c", "--scenarios", "zero", "--catch-up", "0.45")
    assert caught["scenarios"]["zero"]["speed_mean"] < base["scenarios"]["zero"]["speed_mean"]
    # A request's first draft step rejected: a good draft's gain is lost with it.
    opened = _sim(tmp_path, "d", "--scenarios", "high", "--opening", "1")
    assert opened["scenarios"]["high"]["speed_mean"] < base["scenarios"]["high"]["speed_mean"]
    res = run_script("dispatch_sim", *SMALL, "--verify-costs", "1.5,2.2")
    assert res.returncode == 2 and "--verify-costs '1.5,2.2': 3 positive numbers" in res.stderr
    assert "Traceback" not in res.stderr
