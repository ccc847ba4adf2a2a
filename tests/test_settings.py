"""Run settings are declared once (``contract.RUN_SETTINGS``): the library, the CLI and the
C++ runner refuse the same things with the same words, the flags the bench passes to C++
parse back into the same settings, and no command keeps a hand-written copy of one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from etspec.cli import main
from etspec.cli.runner_options import runner_spec
from etspec.contract import RUN_SETTINGS, message
from etspec.errors import EtspecError
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.settings import parse_shape

ROOT = Path(__file__).resolve().parents[1]
PTE = Path("no-such-target.pte")  # every refusal below comes before anything loads

# (command-line flags, the same settings as library arguments, the one message all refuse with)
REFUSED: list[tuple[list[str], dict[str, Any], str]] = [
    (
        ["--draft-method", "eagle3", "--min-ngram", "2"],
        {"draft_method": "eagle3", "options": {"min_ngram": 2}},
        message("option_needs_method", option="--min-ngram", owner="prompt-lookup"),
    ),
    (
        ["--draft-method", "prompt-lookup", "--draft-window", "3"],
        {"draft_method": "prompt-lookup", "options": {"draft_window": 3}},
        message("option_needs_method", option="--draft-window", owner="eagle3"),
    ),
    (
        ["--static-tree", "N8"],
        {"tree": {"static_tree": "N8"}},
        message("knob_needs_mode", option="--static-tree", mode="static"),
    ),
    (
        ["--tree", "chain", "--draft-topk", "2"],
        {"tree": {"mode": "chain", "topk": 2}},
        message("knob_needs_mode", option="--draft-topk", mode="dynamic"),
    ),
    (
        ["--num-spec-tokens", "0"],
        {"tree": {"num_spec_tokens": 0}},
        message("setting_minimum", option="--num-spec-tokens", minimum=1, value=0),
    ),
    (
        ["--tree", "dynamic", "--total-tokens", "1"],
        {"tree": {"mode": "dynamic", "total_tokens": 1}},
        message("setting_minimum", option="--total-tokens", minimum=2, value=1),
    ),
]


def _library(kw: dict[str, Any]) -> None:
    tree = TreeSettings(**kw.get("tree", {}))
    RunnerSpec(
        PTE, Path("d.pte"), kw.get("draft_method", "eagle3"), tree, options=kw.get("options", {})
    )


@pytest.mark.parametrize(("flags", "kw", "words"), REFUSED)
def test_library_and_cli_refuse_alike(flags: list[str], kw: dict[str, Any], words: str) -> None:
    with pytest.raises(EtspecError) as e:
        _library(kw)
    assert str(e.value) == words
    res = CliRunner().invoke(
        main, ["generate", "--target", str(PTE), "--draft", "d.pte", "--prompt-ids", "1", *flags]
    )
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {words}"), res.output


@pytest.mark.parametrize(("flags", "kw", "words"), REFUSED)
def test_cpp_refuses_alike(
    runner_bin: Path, flags: list[str], kw: dict[str, Any], words: str
) -> None:
    res = subprocess.run(
        [str(runner_bin), "--target", str(PTE), "--draft", "d.pte", "--prompt-ids", "1", *flags],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == f"error: {words}"


# Without --draft the default method (combined) decodes target-only: what only a drafting
# method would read is refused, not ignored, in the library, the CLI and the C++ runner.
DRAFTLESS = [
    (
        ["--max-ngram", "2"],
        {"max_ngram": 2},
        message("option_needs_method", option="--max-ngram", owner="prompt-lookup"),
    ),
    (["--draft-window", "2"], {"draft_window": 2}, message("window_needs_draft")),
]


@pytest.mark.parametrize(("flags", "options", "words"), DRAFTLESS)
def test_default_method_without_a_draft_refuses_drafting_options(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, flags: list[str], options: dict[str, Any], words: str
) -> None:
    from etspec.runtime.runner import load_runners

    target = artifacts.target("mistral_tied").pte
    with pytest.raises(EtspecError) as e:
        load_runners(RunnerSpec(target, options=options))
    assert str(e.value) == words
    args = ["generate", "--target", str(target), "--prompt-ids", "1", *flags]
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0 and res.output.startswith(f"error: {words}"), res.output
    cpp = subprocess.run(
        [str(runner_bin), "--target", str(target), "--prompt-ids", "1", *flags],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cpp.returncode != 0 and cpp.stderr.strip() == f"error: {words}", cpp.stderr


def _parsed(command: str, args: list[str]) -> RunnerSpec:
    """What the CLI makes of ``args`` (parsed by click, no command run)."""
    ctx = main.commands[command].make_context(command, ["--target", str(PTE), *args])
    return runner_spec(ctx.params)


@pytest.mark.parametrize(
    "spec",
    [
        RunnerSpec(PTE, Path("d.pte")),
        RunnerSpec(PTE, None, "prompt-lookup", options={"min_ngram": 2, "max_ngram": 4}),
        RunnerSpec(PTE, Path("d.pte"), "combined", kv_strategy="scratch-commit",
                   weight_cache=False, options={"draft_window": 16, "max_ngram": 5}),
        RunnerSpec(PTE, Path("d.pte"), tree=TreeSettings("chain", num_spec_tokens=5)),
        RunnerSpec(PTE, Path("d.pte"), tree=TreeSettings("dynamic", num_steps=3, topk=2)),
    ],
)  # fmt: skip
def test_flags_parse_back_into_the_same_settings(spec: RunnerSpec) -> None:
    """``RunnerSpec.flags``/``TreeSettings.flags`` are what the bench passes the C++ runner:
    parsed as a command line they make the same settings again."""
    draft = ["--draft", str(spec.draft)] if spec.draft else []
    assert _parsed("generate", [*draft, *spec.flags(), *spec.tree.flags()]) == spec


@pytest.mark.parametrize("name", ["chain4", "N7", "D2xBF2", "dynamic-d2k3t9"])
def test_a_shape_name_becomes_settings_that_make_it(name: str) -> None:
    from etspec.contract import TargetMetadata  # noqa: F401 (typing only)
    from etspec.runtime.speculative.settings import tree_policy

    shape = parse_shape(name)
    settings = shape.settings()
    assert settings is not None
    again = _parsed("generate", ["--draft", "d.pte", *settings.flags()]).tree
    assert again == settings

    class Meta:  # what tree_policy reads of a target
        verify_width, verify_widths, dtype = 16, (4, 8, 16), "fp32"

    class Drafter:  # what tree_policy reads of a draft runner: an EAGLE-3 draft's
        branching, has_model, offers = True, True, False

    assert tree_policy(again, Meta(), Drafter()).name == name  # type: ignore[arg-type]


def test_no_command_keeps_a_copy_of_a_run_setting() -> None:
    """The click commands and the C++ CLI make their run-setting options from the table: a
    flag of ``RUN_SETTINGS`` written out in them is a second declaration that can drift."""
    flags = {s.flag for s in RUN_SETTINGS}
    sources = [*sorted((ROOT / "etspec/cli").glob("*.py")), ROOT / "runtime/cpp/src/main.cpp"]
    copies = [
        f"{path.relative_to(ROOT)}: {flag}"
        for path in sources
        # A lookup of the table's row (run_setting("--x")) is a use, not a copy.
        for flag in re.findall(r"""(?<!run_setting\()["'](--[a-z-]+)["']""", path.read_text())
        if flag in flags
    ]
    assert not copies, "declare these in contract.RUN_SETTINGS only:\n" + "\n".join(copies)


def test_validate_reference_runs_a_static_tree_the_exports_hold(tmp_path: Path) -> None:
    """Reference mode verifies as wide as an export does by default (one default), so a
    tree of 8 nodes, which needs a verify of 9, runs on the bundled checkpoints."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [5, 9, 2, 7, 7, 3]}\n')
    res = CliRunner().invoke(
        main,
        ["validate", "--reference", "--target", str(ROOT / "checkpoints/etspec-code-14m"),
         "--draft", str(ROOT / "checkpoints/etspec-code-14m-eagle3"), "--tree", "static",
         "--static-tree", "N8", "--prompts", str(prompts), "--max-new-tokens", "8"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "1/1 prompts identical" in res.output
