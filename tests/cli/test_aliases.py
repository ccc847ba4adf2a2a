"""Names users bring from vLLM, SGLang, llama.cpp and ExecuTorch: every alias in
``contract.OPTION_ALIASES`` is accepted wherever its option is, means the same thing there
(same ids, same shapes run), reaches the C++ runner through the generated header, and the
table in docs/generate.md lists exactly these."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from etspec.cli import main
from etspec.contract import OPTION_ALIASES
from etspec.runtime.speculative.registry import aliases as draft_method_aliases

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "3,1,4,1,5,9,2,6"


def _commands(group: click.Group = main, path: str = "etspec") -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.update(_commands(cmd, f"{path} {name}"))
        else:
            out[f"{path} {name}"] = cmd
    return out


def test_every_option_with_aliases_accepts_all_of_them() -> None:
    seen = set()
    for where, cmd in _commands().items():
        for param in cmd.params:
            names = set(getattr(param, "opts", ()))
            for ours, aliases in OPTION_ALIASES.items():
                if ours in names:
                    seen.add(ours)
                    missing = {a for a, _ in aliases} - names
                    assert not missing, (where, ours, missing)
    assert seen == set(OPTION_ALIASES), set(OPTION_ALIASES) - seen  # no alias of nothing


def test_help_shows_our_name_and_lists_the_aliases() -> None:
    cmd = _commands()["etspec generate"]
    text = cmd.get_help(click.Context(cmd, terminal_width=400, max_content_width=400))
    assert "--num-spec-tokens INTEGER" in text
    assert "[aliases: --num-speculative-tokens, --draft-max]" in text
    assert "not sampling's --top-k" in text  # the draft top-k says which it is


def _generate(*args: str) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(main, ["generate", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_aliases_mean_what_our_names_mean(artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    base = ["--target", str(pair.target.pte), "--draft", str(pair.pte), "--draft-method",
            "eagle3", "--prompt-ids",
            PROMPT, "--max-new-tokens", "24", "--ignore-eos"]  # fmt: skip
    chain = _generate(*base, "--tree", "chain", "--num-spec-tokens", "5")
    for alias in ("--num-speculative-tokens", "--draft-max"):
        out = _generate(*base, "--tree", "chain", alias, "5")
        assert out["token_ids"] == chain["token_ids"]
        # A chain step each, and a plain decode for the budget's last token.
        assert set(out["stats"]["shape_steps"]) <= {"chain5", "none"}
        assert out["stats"]["shape_steps"]["chain5"] > 0
    dyn = ["--tree", "dynamic", "--depth", "2", "--total-tokens", "9"]
    tree = _generate(*base, *dyn, "--draft-topk", "3")
    for alias in ("--speculative-eagle-topk", "--topk", "--top-k-draft"):
        out = _generate(*base, *dyn, alias, "3")
        assert out["stats"]["shape_steps"] == tree["stats"]["shape_steps"]
    assert set(tree["stats"]["shape_steps"]) - {"none"} == {"dynamic-d2k3t9"}
    sglang_args = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "3",
              "--speculative-num-draft-tokens", "9"]  # fmt: skip
    sglang = _generate(*base, "--tree", "dynamic", *sglang_args)
    assert set(sglang["stats"]["shape_steps"]) - {"none"} == {"dynamic-d2k3t9"}
    temp = _generate(*base, "--tree", "chain", "--temp", "0.9", "--seed", "3", "--max-tokens", "7")
    same = _generate(*base, "--tree", "chain", "--temperature", "0.9", "--seed", "3",
                     "--n-predict", "7")  # fmt: skip
    assert temp["token_ids"] == same["token_ids"] and len(temp["token_ids"]) == 7


def test_vllm_ngram_names_for_prompt_lookup(artifacts) -> None:  # type: ignore[no-untyped-def]
    target = artifacts.tree_draft().target.pte
    base = ["--target", str(target), "--prompt-ids", "1,2,3,1,2,3,1,2", "--max-new-tokens",
            "16", "--ignore-eos", "--tree", "chain"]  # fmt: skip
    ours = _generate(*base, "--draft-method", "prompt-lookup", "--max-ngram", "2")
    theirs = _generate(*base, "--draft-method", "ngram", "--prompt-lookup-max", "2",
                       "--prompt-lookup-min", "1")  # fmt: skip
    assert draft_method_aliases()["ngram"] == "prompt-lookup"
    assert ours["token_ids"] == theirs["token_ids"]
    assert ours["stats"]["verify_calls"] == theirs["stats"]["verify_calls"]
    res = CliRunner().invoke(main, ["generate", *base, "--prompt-lookup-max", "2"])
    assert res.exit_code == 2 and "add --draft-method prompt-lookup" in res.output


def test_export_takes_executorch_and_llama_cpp_context_names(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cmd = _commands()["etspec export target"]
    ckpt = str(artifacts.target("llama_small_vocab").checkpoint)
    for alias in ("--max-context-length", "--ctx-size"):
        ctx = cmd.make_context("target", [ckpt, "-o", str(tmp_path / "t.pte"), alias, "48"])
        assert ctx.params["max_seq"] == 48


def test_cpp_runner_takes_the_aliases(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()

    def run(*args: str) -> list[int]:
        res = subprocess.run(
            [str(runner_bin), "--target", str(pair.target.pte), "--draft", str(pair.pte),
             "--prompt-ids", PROMPT, "--ignore-eos", "--json", "--tree", "chain", *args],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["token_ids"]

    ours = run("--num-spec-tokens", "5", "--max-new-tokens", "20")
    assert run("--num-speculative-tokens", "5", "--n-predict", "20") == ours
    assert run("--draft-max", "5", "--max-tokens", "20") == ours and len(ours) == 20


def _table_rows() -> list[str]:
    return [
        f"| `{ours}` | `{alias}` | {source} |"
        for ours, aliases in OPTION_ALIASES.items()
        for alias, source in aliases
    ]


@pytest.mark.parametrize("row", _table_rows())
def test_the_docs_table_lists_every_alias(row: str) -> None:
    table = (ROOT / "docs" / "generate.md").read_text()
    assert row in table, f"add to the alias table in docs/generate.md: {row}"
