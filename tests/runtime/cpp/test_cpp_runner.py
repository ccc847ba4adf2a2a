"""The C++ runner (runtime/cpp): built against the executorch wheel's SDK when a compiler
and CMake are present, then held to the Python runtime: identical greedy ids and stats,
seeded sampling reproducible and distributed as the target's, the same one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import random_prompts
from test_sampling import (  # noqa: F401 (exact_marginals is a fixture)
    ALPHA,
    PROMPT,
    TEMPERATURE,
    V,
    chi_square_pvalue,
    exact_marginals,
)

from etspec.contract import LOOKUP_LABEL
from etspec.errors import EtspecError
from etspec.runtime.runner import load_runners
from etspec.runtime.spec import RunnerSpec, TreeSettings


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)


def _cpp(binary: Path, target: Path, prompt: list[int], *args: str) -> list[dict]:  # type: ignore[type-arg]
    ids = ",".join(map(str, prompt))
    res = _run(binary, "--target", str(target), "--prompt-ids", ids, "--json", *args)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def _python(  # type: ignore[no-untyped-def]
    target: Path,
    draft: Path | None,
    prompt: list[int],
    budget: int,
    tree: str,
    kv: str,
    draft_method: str = "eagle3",
    draft_window: int | None = None,
):
    spec = RunnerSpec(
        target,
        draft,
        draft_method,
        tree=TreeSettings() if tree == "target-only" else TreeSettings(tree, 3),
        kv_strategy=kv,
        options={} if draft_window is None else {"draft_window": draft_window},
    )
    base, spec_runner = load_runners(spec)
    return (spec_runner or base).generate(prompt, budget, ignore_eos=True)


def _same_as_python(out: dict, ref, keys: tuple[str, ...], label: object) -> None:  # type: ignore[no-untyped-def, type-arg]
    """The binary's ``--json`` record has Python's ids and these stats fields."""
    assert out["token_ids"] == ref.token_ids, label
    for key in keys:
        assert out["stats"][key] == getattr(ref.stats, key), (key, label)


MODES = [
    ("target-only", "position-overwrite"),
    ("chain", "position-overwrite"),
    ("chain", "scratch-commit"),
    ("static", "position-overwrite"),  # the default static tree: N(min(K - 1, 15))
    ("static", "scratch-commit"),
]


PAIRS = {
    "small": lambda a: a.small_draft(),
    "step4": lambda a: a.draft(),
    # Sliding-window targets (12-token window) with KV-shared layers and per-layer inputs.
    "gemma3": lambda a: a.gemma_draft("gemma3_sliding"),
    "gemma4": lambda a: a.gemma_draft("gemma4_shared_ple"),
}


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize(("tree", "kv"), MODES)
def test_greedy_ids_and_stats_equal_python(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, pair: str, tree: str, kv: str
) -> None:
    case = PAIRS[pair](artifacts)
    vocab = case.target.hf.config.vocab_size
    draft = None if tree == "target-only" else case.pte
    for i, prompt in enumerate(random_prompts(4, vocab, 20, seed=21)):
        budget = 9 + 7 * i
        ref = _python(case.target.pte, draft, prompt, budget, tree, kv)
        args = ["--max-new-tokens", str(budget), "--ignore-eos"]
        if draft is not None:
            args += ["--draft", str(draft), "--draft-method", "eagle3", "--tree", tree]
            args += ["--num-spec-tokens", "3"]
            args += ["--kv", kv]
        (out,) = _cpp(runner_bin, case.target.pte, prompt, *args)
        assert out["token_ids"] == ref.token_ids, (tree, kv, i)
        st, want = out["stats"], ref.stats.to_dict()
        for key in ("verify_calls", "accepted_tokens", "accept_pos", "draft_calls", "commit_calls"):
            assert st[key] == want[key], (key, tree, kv, i)
        for key in ("shape_steps", "shape_drafted", "shape_accepted"):  # per drafter
            assert st[key] == want[key], (key, tree, kv, i)
        assert set(st) == set(want) - {"steps"}  # the same JSON fields as Python's


@pytest.mark.parametrize(("tree", "kv"), MODES[:3])
def test_sliding_band_past_the_first_granule_equals_python(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tree: str, kv: str
) -> None:
    """A 70-token prompt and 20 more tokens in a 96-token context: from position 75 on, the
    sliding layers' band starts at slot 64 (contract.band_start), in both runtimes alike."""
    case = PAIRS["gemma3"](artifacts)
    vocab = case.target.hf.config.vocab_size
    prompt = torch.randint(0, vocab, (70,), generator=torch.Generator().manual_seed(3)).tolist()
    draft = None if tree == "target-only" else case.pte
    ref = _python(case.target.pte, draft, prompt, 20, tree, kv)
    args = ["--max-new-tokens", "20", "--ignore-eos"]
    if draft is not None:
        args += ["--draft", str(draft), "--draft-method", "eagle3", "--tree", tree]
        args += ["--num-spec-tokens", "3", "--kv", kv]
    (out,) = _cpp(runner_bin, case.target.pte, prompt, *args)
    assert out["token_ids"] == ref.token_ids and len(ref.token_ids) == 20
    assert out["stats"]["verify_calls"] == ref.stats.verify_calls


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
@pytest.mark.parametrize("pair", ["step4", "gemma3"])
def test_dynamic_trees_equal_python(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, pair: str, kv: str
) -> None:
    """``--tree dynamic`` (EAGLE-2): the default tree for the widest verify and one with
    every knob given, as the bench passes them: Python's ids, calls and acceptance."""
    from etspec.runtime.speculative.settings import parse_shape
    from etspec.tools.peers.cpp_runner import method_args, tree_args

    case = PAIRS[pair](artifacts)
    vocab = case.target.hf.config.vocab_size
    for n, (settings, tree) in enumerate(
        [
            (TreeSettings("dynamic"), "dynamic"),
            (TreeSettings("dynamic", depth=1, topk=3, total_tokens=6), "dynamic-d1k3t6"),
        ]
    ):
        shape = tree_args(settings if tree == "dynamic" else parse_shape(tree))
        assert shape is not None
        for i, prompt in enumerate(random_prompts(3, vocab, 20, seed=17 + n)):
            spec = RunnerSpec(case.target.pte, case.pte, "eagle3", tree=settings, kv_strategy=kv)
            _, runner = load_runners(spec)
            ref = runner.generate(prompt, 18, ignore_eos=True)
            method = method_args(spec)
            assert method is not None
            args = [*method, *shape]
            (out,) = _cpp(
                runner_bin, case.target.pte, prompt, "--max-new-tokens", "18", "--ignore-eos", *args
            )
            keys = ("verify_calls", "draft_calls", "accepted_tokens", "accept_pos", "commit_calls")
            shapes = ("shape_steps", "shape_drafted", "shape_accepted")
            _same_as_python(out, ref, (*keys, *shapes), (tree, kv, i))


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
@pytest.mark.parametrize("pair", ["step4", "gemma3"])
def test_auto_tree_gives_python_s_ids(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, pair: str, kv: str
) -> None:
    """``--tree auto`` (the default) in C++: its choices follow measured time, so only the
    ids must equal Python's (lossless whatever it picks; the choices themselves are held
    to Python's on recorded costs in test_cpp_dispatcher.py). It serves several prompts on
    one load, as the bench does, and picks more than one shape."""
    case = PAIRS[pair](artifacts)
    vocab = case.target.hf.config.vocab_size
    prompts = random_prompts(4, vocab, 20, seed=29)
    spec = RunnerSpec(case.target.pte, case.pte, tree=TreeSettings("auto"), kv_strategy=kv)
    _, runner = load_runners(spec)
    want = [runner.generate(p, 24, ignore_eos=True).token_ids for p in prompts]
    requests = "".join(
        json.dumps({"prompt_ids": p, "max_new_tokens": 24, "ignore_eos": True}) + "\n"
        for p in prompts
    )
    res = subprocess.run(
        [str(runner_bin), "--target", str(case.target.pte), "--draft", str(case.pte),
         "--kv", kv, "--serve"],
        input=requests, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    outs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["token_ids"] for o in outs] == want
    shapes = {name for o in outs for name in o["stats"]["shape_steps"]}
    assert len(shapes) > 1, shapes
    # Each answer carries what the dispatcher measured so far: Python's candidates, and
    # steps per way that add up to the answers' steps, but for the step that ends each
    # request (the sink stops it before the dispatcher observes it).
    report = outs[-1]["policy_report"]
    python = [k for k in runner.describe()["policy_report"] if not k.startswith(LOOKUP_LABEL)]
    assert [k for k in report if not k.startswith(LOOKUP_LABEL)] == python
    steps: dict[str, int] = {}
    for o in outs:
        for name, n in o["stats"]["shape_steps"].items():
            steps[name] = steps.get(name, 0) + n
    reported = {name: report[name]["steps"] for name in python}
    lookups = [v["steps"] for k, v in report.items() if k.startswith(LOOKUP_LABEL)]
    reported[LOOKUP_LABEL] = sum(lookups)
    unseen = {name: steps.get(name, 0) - n for name, n in reported.items()}
    assert min(unseen.values()) >= 0 and sum(unseen.values()) <= len(outs), unseen
    assert sum(reported.values()) > len(outs)
    for name in python:
        assert report[name]["estimated_tokens_per_s"] > 0 < report[name]["predicted_step_s"]


@pytest.mark.parametrize(("tree", "kv"), MODES[1:])
def test_draft_window_equals_python(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tree: str, kv: str
) -> None:
    """``--draft-window 4`` (the draft attends to its last 4 positions): the Python runtime's
    ids, calls and acceptance, on prompts longer and shorter than the window."""
    case = PAIRS["step4"](artifacts)
    vocab = case.target.hf.config.vocab_size
    moved = False
    for i, prompt in enumerate(random_prompts(3, vocab, 30, seed=13)):
        ref = _python(case.target.pte, case.pte, prompt, 20, tree, kv, draft_window=4)
        full = _python(case.target.pte, case.pte, prompt, 20, tree, kv)
        moved = moved or full.stats.accept_pos != ref.stats.accept_pos
        args = ["--draft", str(case.pte), "--draft-method", "eagle3", "--draft-window", "4"]
        args += ["--tree", tree]
        args += ["--num-spec-tokens", "3", "--kv", kv, "--max-new-tokens", "20", "--ignore-eos"]
        (out,) = _cpp(runner_bin, case.target.pte, prompt, *args)
        keys = ("verify_calls", "draft_calls", "accepted_tokens", "accept_pos")
        _same_as_python(out, ref, keys, (tree, kv, i))
    assert moved  # the window changed what the draft proposed: it was not ignored


@pytest.mark.parametrize(("tree", "kv"), MODES[1:])
def test_prompt_lookup_equals_python(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tree: str, kv: str
) -> None:
    """Prompt lookup in C++ (``--draft-method prompt-lookup``, the arguments the registry's
    ``method_args`` gives): the Python runtime's ids, verify calls and acceptance on prompts
    that
    repeat themselves (so lookups hit) and on random ones (so they miss and decode)."""
    case = PAIRS["small"](artifacts)
    vocab = case.target.hf.config.vocab_size
    g = torch.Generator().manual_seed(5)
    motif = torch.randint(1, vocab, (6,), generator=g).tolist()
    prompts = [motif * 4, (motif + motif[:3]) * 3, *random_prompts(2, vocab, 20, seed=8)]
    hits = 0
    for i, prompt in enumerate(prompts):
        ref = _python(case.target.pte, None, prompt, 24, tree, kv, "prompt-lookup")
        hits += ref.stats.accepted_tokens if i < 2 else 0
        method = ["--draft-method", "prompt-lookup", "--max-ngram", "3", "--min-ngram", "1"]
        args = [*method, "--tree", tree, "--num-spec-tokens", "3", "--kv", kv]
        (out,) = _cpp(
            runner_bin, case.target.pte, prompt, "--max-new-tokens", "24", "--ignore-eos", *args
        )
        keys = ("verify_calls", "decode_calls", "accepted_tokens", "accept_pos", "commit_calls")
        _same_as_python(out, ref, keys, (tree, kv, i))
    assert hits > 0  # the repeating prompts exercised accepted lookups, not only misses


def test_seeded_sampling_repeats_and_matches_the_target_distribution(  # type: ignore[no-untyped-def]
    artifacts,
    runner_bin: Path,
    exact_marginals,  # noqa: F811 (the fixture imported above)
) -> None:
    case = artifacts.small_draft()
    # A fixed shape: under --tree auto the choices follow timing, and so would the samples.
    args = ["--draft", str(case.pte), "--tree", "chain", "--num-spec-tokens", "2"]
    args += ["--temperature", str(TEMPERATURE), "--max-new-tokens", "3", "--ignore-eos"]
    n = 10_000
    runs = _cpp(runner_bin, case.target.pte, PROMPT, *args, "--seed", "5", "--num-samples", str(n))
    again = _cpp(runner_bin, case.target.pte, PROMPT, *args, "--seed", "5", "--num-samples", "50")
    other = _cpp(runner_bin, case.target.pte, PROMPT, *args, "--seed", "6", "--num-samples", "50")
    ids = [r["token_ids"] for r in runs]
    assert ids[:50] == [r["token_ids"] for r in again]
    assert ids[:50] != [r["token_ids"] for r in other]
    c2, c3 = torch.zeros(V), torch.zeros(V)
    for t in ids:
        c2[t[1]] += 1
        c3[t[2]] += 1
    assert sum(r["stats"]["accepted_tokens"] for r in runs) > n // 10
    p2, p3 = exact_marginals
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


def test_combined_drafter_is_exact_and_uses_both_drafters(  # type: ignore[no-untyped-def]
    artifacts,
    runner_bin: Path,
    exact_marginals,  # noqa: F811 (the fixture imported above)
) -> None:
    """``--draft-method combined`` in C++ (``method_args``, from the settings table): greedy
    ids are the target's own on prompts that repeat (lookups hit) and random ones; steps came
    from both drafters; seeded sampling repeats and is distributed as the target's."""
    from etspec.tools.peers.cpp_runner import method_args

    case = PAIRS["small"](artifacts)
    vocab = case.target.hf.config.vocab_size
    g = torch.Generator().manual_seed(5)
    motif = torch.randint(1, vocab, (6,), generator=g).tolist()
    spec = RunnerSpec(case.target.pte, case.pte, "combined")
    method = method_args(spec)
    assert method is not None
    steps: dict[str, int] = {}
    for i, prompt in enumerate([motif * 4, *random_prompts(3, vocab, 20, seed=8)]):
        ref = _python(case.target.pte, None, prompt, 24, "target-only", "position-overwrite")
        (out,) = _cpp(runner_bin, case.target.pte, prompt, *method, "--max-new-tokens", "24",
                      "--ignore-eos", "--tree", "chain")  # fmt: skip
        assert out["token_ids"] == ref.token_ids, i
        for name, n in out["stats"]["shape_steps"].items():
            steps[name] = steps.get(name, 0) + n
    assert steps.get(LOOKUP_LABEL, 0) > 0 and steps.get("chain3", 0) > 0, steps
    args = [*method, "--tree", "chain", "--num-spec-tokens", "2", "--temperature",
            str(TEMPERATURE), "--max-new-tokens", "3", "--ignore-eos"]  # fmt: skip
    n = 10_000
    runs = _cpp(runner_bin, case.target.pte, PROMPT, *args, "--seed", "5", "--num-samples", str(n))
    again = _cpp(runner_bin, case.target.pte, PROMPT, *args, "--seed", "5", "--num-samples", "50")
    ids = [r["token_ids"] for r in runs]
    assert ids[:50] == [r["token_ids"] for r in again]
    assert sum(r["stats"]["shape_steps"].get(LOOKUP_LABEL, 0) for r in runs) > n // 10
    c2, c3 = torch.zeros(V), torch.zeros(V)
    for t in ids:
        c2[t[1]] += 1
        c3[t[2]] += 1
    p2, p3 = exact_marginals
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


def _python_error(fn, path: Path) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(EtspecError) as e:
        fn(path)
    return str(e.value)


def test_bad_files_and_pairs_get_python_s_one_line_errors(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path
) -> None:
    from etspec.artifact import open_artifact
    from etspec.runtime.program import load_pair

    small, other = artifacts.small_draft(), artifacts.draft()
    junk = tmp_path / "junk.pte"
    junk.write_bytes(os.urandom(4096))
    cases = [
        (tmp_path / "missing.pte", None, lambda p: open_artifact(p, "target")),
        (junk, None, lambda p: open_artifact(p, "target")),
        (small.pte, None, lambda p: open_artifact(p, "target")),  # a draft given as target
        (small.target.pte, other.pte, lambda p: load_pair(p, other.pte)),  # another target's
    ]
    for target, draft, python in cases:
        args = ["--target", str(target), "--prompt-ids", "1,2"]
        if draft is not None:
            args += ["--draft", str(draft)]
        res = _run(runner_bin, *args)
        assert res.returncode == 1, res.stderr
        expected = f"error: {_python_error(python, target)}"
        assert res.stderr.splitlines() == [expected]  # ExecuTorch's own logs stay quiet


def test_a_dynamic_tree_too_deep_for_int64_is_refused(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    """--depth 2^61 wrapped the tree's node counts below the scratch check (Python's
    integers do not wrap: it refused); now both refuse it in one line."""
    small = artifacts.small_draft()
    args = ["--prompt-ids", "1", "--draft", str(small.pte), "--draft-method", "eagle3"]
    res = _run(runner_bin, "--target", str(small.target.pte), *args,
               "--tree", "dynamic", "--depth", str(1 << 61))  # fmt: skip
    assert res.returncode == 1 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "scratch slots" in lines[0], lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt-ids", "1,x"], "--prompt-ids takes comma-separated integers"),
        (["--prompt-ids", "1", "--temperature", "-1"], "temperature must be a finite number"),
        (["--prompt-ids", "1", "--top-p", "0"], "top-p must be in (0, 1]"),
        (["--prompt-ids", "1", "--tree", "bogus"], "choose one of chain, static, dynamic, auto"),
        (["--prompt-ids", "1", "--bogus", "3"], "unknown option --bogus"),
        (["--prompt-ids", "99999"], "prompt token id 99999 is outside the vocabulary"),
        (["--prompt-ids", "1", "--max-new-tokens", "0"], "max_new_tokens must be at least 1"),
        (["--prompt-ids", "1", "--max-new-tokens", "500"], "exceeds the context of 64"),
    ],
)
def test_bad_arguments_are_one_line_errors(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, args: list[str], message: str
) -> None:
    res = _run(runner_bin, "--target", str(artifacts.small_draft().target.pte), *args)
    assert res.returncode in (1, 2) and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_nan_target_logits_are_refused_when_sampling_with_python_s_message(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, tmp_path: Path
) -> None:
    """Finite weights whose logits overflow to +-inf leave nothing to sample from: both
    runtimes refuse with the contract's one line instead of drawing from NaN weights."""
    import shutil

    from click.testing import CliRunner
    from safetensors.torch import load_file, save_file

    from etspec.cli import main
    from etspec.contract import message
    from etspec.export.export_target import TargetExportOptions, export_target

    case = artifacts.target("llama_small_vocab")
    ckpt = tmp_path / "overflowing"
    shutil.copytree(case.checkpoint, ckpt)
    weights = load_file(ckpt / "model.safetensors")
    key = "lm_head.weight" if "lm_head.weight" in weights else "model.embed_tokens.weight"
    w = weights[key]
    weights[key] = torch.where(torch.randn_like(w) > 0, 3e38, -3e38)  # finite, as weights go
    save_file(weights, ckpt / "model.safetensors", metadata={"format": "pt"})
    pte = tmp_path / "overflowing.pte"
    export_target(ckpt, pte, TargetExportOptions(backend="portable", max_seq=32, prefill_chunk=8,
                                                 verify_width=4))  # fmt: skip
    want = f"error: {message('target_logits_nan')}"
    args = ["--prompt-ids", "3,1,4", "--temperature", "1", "--seed", "0"]
    res = _run(runner_bin, "--target", str(pte), *args)
    assert res.returncode == 1 and res.stderr.splitlines() == [want], res.stderr
    py = CliRunner().invoke(main, ["generate", "--target", str(pte), *args])
    assert py.exit_code == 1 and py.output.splitlines() == [want], py.output
