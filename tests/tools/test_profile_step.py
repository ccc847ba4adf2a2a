"""scripts/profile_step.py on a tiny pair, run as a user runs it: every stage's time is split
into the program's calls and the host work around them, and the parts add up to what the
runner measured."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Artifacts
from helpers import run_script


def test_profile_step_splits_each_stage_into_calls_and_host_work(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    pair = artifacts.draft()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"prompt_ids": [1 + i, 5, 9, 3 + i]}) for i in range(3)) + "\n"
    )
    out = tmp_path / "profile.json"
    res = run_script(
        "profile_step", "--target", pair.target.pte, "--draft", pair.pte, "--trees", "chain3",
        "--prompts", prompts, "--max-new-tokens", 12, "--repeats", 2, "--json", out,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    row = json.loads(out.read_text())["shapes"]["chain3"]
    assert row["tokens"] == 3 * 12 and row["steps"] >= 3 * 12 // 4
    assert row["tpc"] == round(row["tokens"] / row["steps"], 4)
    # One target call per step (a verify, or the one-row decode when the budget leaves no
    # room to draft); a chain of 3 makes at most two draft steps per step.
    calls = row["calls_per_step"]
    target = ("target_verify", "target_decode")
    assert sum(v for m, v in calls.items() if m.startswith(target)) == 1.0
    assert 0 < calls.get("draft_step", 0) <= 2.0
    prog, host = row["program_ms"], row["host_ms"]
    assert prog["verify"] > 0 and prog["draft_step"] > 0 and prog["draft_extend"] > 0
    parts = host["draft"] + host["tensorize"] + host["accept"] + host["commit"]
    assert abs(host["total"] - parts) < 1e-3  # rounding of the parts only
    assert host["tensorize"] > 0 and host["accept"] > 0
    assert "chain3: host" in res.stdout
