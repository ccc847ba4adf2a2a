"""Gemma 4's assistant drafter, exported into its target's ``.pte``.

- Its logits and output states equal transformers' ``Gemma4AssistantForCausalLM`` forward on
  the same target state (the target's shared KV and final normed state), 1e-4, with and
  without ordered embeddings, before and past the sliding window, for a step fed the
  target's state and one fed its own.
- Greedy speculation with it equals target-only (chain, static and dynamic trees, both KV
  strategies, pte and eager) and equals transformers' ``generate(assistant_model=...)``.
- ``etspec generate`` and ``validate`` run it and report its acceptance.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers import check_greedy_equivalence, max_diff, random_prompts, runners
from tiny import make_hf_assistant, make_hf_target, write_tokenizer

from etspec.cli import main
from etspec.contract import ASSISTANT_STEP
from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.eager import eager_target
from etspec.runtime.prefill import prefill_target
from etspec.runtime.program import PteProgram
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.gemma4_assistant import Gemma4AssistantDraftRunner
from etspec.runtime.speculative.static_tree import StaticTree

TARGET = "gemma4_shared_ple"  # KV-shared layers, per-layer inputs, 12-token window
TOL = 1e-4
OPTS = dict(max_seq=96, prefill_chunk=8, verify_width=8, narrow_verify_widths=(4,))


class Pair:
    def __init__(self, root: Path, ordered: bool) -> None:
        self.target_dir = root / "target"
        self.assistant_dir = root / f"assistant_{ordered}"
        self.hf = make_hf_target(TARGET, self.target_dir)
        self.hf_assistant = make_hf_assistant(TARGET, self.assistant_dir, ordered)
        # Embedded in the .pte: bench takes text. Gemma needs <bos> (id 2) in front.
        write_tokenizer(self.target_dir, 32, bos=2)
        self.pte = root / f"target_{ordered}.pte"
        opts = TargetExportOptions(backend="portable", assistant=self.assistant_dir, **OPTS)  # type: ignore[arg-type]
        export_target(self.target_dir, self.pte, opts)

    def program(self, mode: str):  # type: ignore[no-untyped-def]
        if mode == "pte":
            prog = PteProgram.load(self.pte, expect="target")
        else:
            prog = eager_target(self.target_dir, assistant=self.assistant_dir, **OPTS)  # type: ignore[arg-type]
        prog.run("target_reset")
        return prog


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "ordered"])
def pair(request, tmp_path_factory) -> Pair:  # type: ignore[no-untyped-def]
    return Pair(tmp_path_factory.mktemp("assistant"), request.param)


@pytest.mark.parametrize("mode", ["eager", "pte"])
def test_step_matches_transformers_forward(pair: Pair, mode: str) -> None:
    prog = pair.program(mode)
    gen = torch.Generator().manual_seed(3)
    embed = pair.hf.get_input_embeddings()
    for n in (5, 12, 13, 30):  # before, at and past the 12-token window
        ids = torch.randint(0, 32, (n + 2,), generator=gen)
        prog.run("target_reset")
        prefilled = prefill_target(prog, ids[:n])
        with torch.no_grad():
            out = pair.hf(ids[None, :n], output_hidden_states=True, return_shared_kv_states=True)
            state = out.hidden_states[-1][:, -1:]
            # The target's normed final state is what the target methods export.
            assert max_diff(prefilled.hidden[-1], state[0, 0]) < TOL
            fed = prefilled.hidden[-1]
            for k in range(2):  # fed the target's state, then its own output state
                ref = pair.hf_assistant(
                    inputs_embeds=torch.cat([embed(ids[None, n + k : n + k + 1]), state], -1),
                    position_ids=torch.tensor([[n]]),
                    shared_kv_states=out.shared_kv_states,
                    attention_mask=torch.ones(1, n + 1, dtype=torch.long),
                )
                w = prog.metadata.assistant_step_width
                tokens = torch.zeros(w, dtype=torch.long)
                tokens[0] = ids[n + k]
                states = torch.zeros(w, state.shape[-1])
                states[0] = fed
                logits, states_out = prog.run(ASSISTANT_STEP, tokens, states, torch.tensor([n]))
                assert max_diff(logits[0], ref.logits[0, 0]) < TOL, (n, k)
                assert max_diff(states_out[0], ref.last_hidden_state[0, 0]) < TOL, (n, k)
                state, fed = ref.last_hidden_state, states_out[0]


SHAPES = {
    "chain4": 4,
    "N7": StaticTree.pruned(7),
    "dynamic7": DynamicTree(depth=3, topk=2, total_tokens=8),
}
PROMPTS = random_prompts(4, vocab=32, longest=14, seed=13)
BUDGETS = [30, 22, 40, 26]


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", ["eager", "pte"])
def test_greedy_speculation_equals_target_only(pair: Pair, mode: str, shape: str, kv: str) -> None:
    target = pair.program(mode)
    base, spec = runners(target, Gemma4AssistantDraftRunner(target), SHAPES[shape], kv)
    results = check_greedy_equivalence(f"{mode} {shape} {kv}", base, spec, PROMPTS, BUDGETS)
    assert sum(out.stats.draft_calls for out, _ in results) > 0


def test_auto_tree_times_the_assistant(pair: Pair) -> None:
    """``--tree auto`` counts assistant_step in its cost model and stays exact."""
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec, TreeSettings
    from etspec.runtime.speculative.costs import measure_costs

    target = pair.program("pte")
    costs = measure_costs(target, Gemma4AssistantDraftRunner(target))
    assert costs.step_width == 4 and costs.draft_s > 0
    spec = RunnerSpec(pair.pte, None, "gemma4-assistant", tree=TreeSettings("auto"))
    base, auto = load_runners(spec)
    assert auto is not None
    check_greedy_equivalence("pte auto", base, auto, PROMPTS, BUDGETS)


def test_greedy_equals_transformers_assisted_generate(pair: Pair) -> None:
    target = pair.program("pte")
    base, spec = runners(target, Gemma4AssistantDraftRunner(target), 4)
    pair.hf.generation_config.eos_token_id = None
    pair.hf_assistant.generation_config.num_assistant_tokens = 4
    for prompt in PROMPTS[:2]:
        ids = torch.tensor([prompt])
        with torch.no_grad():
            expected = pair.hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                assistant_model=pair.hf_assistant,
                do_sample=False,
                max_new_tokens=24,
                pad_token_id=0,
            )[0, len(prompt) :].tolist()
        out = spec.generate(prompt, 24, ignore_eos=True)
        assert out.token_ids == expected
        assert out.token_ids == base.generate(prompt, 24, ignore_eos=True).token_ids


def test_cli_generate_and_validate(pair: Pair) -> None:
    ids = ",".join(map(str, PROMPTS[2]))
    common = ["--target", str(pair.pte), "--draft-method", "gemma4-assistant"]
    res = CliRunner().invoke(
        main, ["generate", *common, "--prompt-ids", ids, "--max-new-tokens", "20", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert '"accepted_tokens"' in res.output and '"accept_pos"' in res.output
    res = CliRunner().invoke(main, ["inspect", str(pair.pte)])
    assert "drafter inside: gemma4_assistant (4 rows per call" in res.output, res.output
    res = CliRunner().invoke(main, ["validate", *common, "--max-new-tokens", "20"])
    assert res.exit_code == 0, res.output
    assert "prompts identical, " in res.output and "0 failures" in res.output


def test_a_target_without_assistant_is_refused(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    pte = artifacts.target(TARGET).pte
    args = ["--target", str(pte), "--draft-method", "gemma4-assistant", "--prompt-ids", "1,2"]
    cpp = subprocess.run([str(runner_bin), *args], capture_output=True, text=True)
    assert cpp.returncode == 1 and cpp.stdout == "", cpp
    (line,) = cpp.stderr.splitlines()
    assert line.startswith("error: this target artifact holds no Gemma 4 assistant")
    res = CliRunner().invoke(
        main,
        [
            "generate",
            "--target",
            str(pte),
            "--draft-method",
            "gemma4-assistant",
            "--prompt-ids",
            "1,2",
        ],
    )
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1, res.output
    assert "holds no Gemma 4 assistant" in lines[0] and "--assistant" in lines[0]


@pytest.mark.parametrize(
    ("tree", "kv"),
    [
        ("chain", "position-overwrite"),
        ("static", "position-overwrite"),
        ("static", "scratch-commit"),
    ],
)
def test_cpp_runner_equals_python(pair: Pair, runner_bin: Path, tree: str, kv: str) -> None:
    from test_cpp_runner import _cpp, _python

    for i, prompt in enumerate(PROMPTS[:3]):
        budget = 12 + 9 * i
        ref = _python(pair.pte, None, prompt, budget, tree, kv, "gemma4-assistant")
        args = [
            "--max-new-tokens",
            str(budget),
            "--ignore-eos",
            "--draft-method",
            "gemma4-assistant",
        ]
        args += ["--tree", tree, "--num-spec-tokens", "3", "--kv", kv]
        (out,) = _cpp(runner_bin, pair.pte, prompt, *args)
        assert out["token_ids"] == ref.token_ids, (tree, kv, i)
        st, want = out["stats"], ref.stats.to_dict()
        for key in ("verify_calls", "accepted_tokens", "accept_pos", "draft_calls", "commit_calls"):
            assert st[key] == want[key], (key, tree, kv, i)
        assert st["memory"]["draft_kv_bytes"] == want["memory"]["draft_kv_bytes"] == 0


def test_bench_runs_the_assistant_in_python_and_cpp(
    pair: Pair, runner_bin: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    texts = ["w5 w17 w3 w5 w17", "w9 w2 w9 w4", "w1 w2 w3 w1 w2 w3"]
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(
        main,
        [
            "bench", "--target", str(pair.pte), "--draft-method", "gemma4-assistant",
            "--prompts", str(prompts), "--trees", "chain3,N7", "--max-new-tokens", "16",
            "--cpp-runner", str(runner_bin), "--json", str(out),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())["summary"]
    for name in ("chain3", "N7", "cpp chain3", "cpp N7"):
        assert summary[name]["identical"] == 3, name  # greedy: target-only's ids
        assert summary[name]["tpc"]["mean"] > 0 and "accept_pos" in summary[name], name
        assert "auto_report" not in summary[name], name  # a fixed shape measures nothing
