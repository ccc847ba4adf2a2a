"""The C++ runtime's chat templates (minja): rendered as transformers renders them, refused
in the Python runtime's words, and `--serve` requests with messages answered with the
Python runner's tokens."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tiny import CHAT_FAMILIES, CHAT_SPECIAL, LLAMA3, chat_conversations, transformers_render

from etspec.runtime.runner import TextLLMRunner


@pytest.fixture(scope="module")
def render_bin(runner_bin: Path) -> Path:
    return runner_bin.parent / "etspec_chat_render"


def _render(tool: Path, template: str, conversations: list, generation: bool, tmp: Path) -> list:  # type: ignore[type-arg]
    request = {
        "stored": json.dumps({"template": template, **CHAT_SPECIAL}),
        "conversations": conversations,
        "add_generation_prompt": generation,
    }
    (tmp / "request.json").write_text(json.dumps(request))
    res = subprocess.run([str(tool), str(tmp / "request.json")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["rendered"]


@pytest.mark.parametrize("family", ["gemma3", "qwen2", "llama3"])
def test_twenty_conversations_render_as_transformers(
    render_bin: Path, family: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    template, conversations = CHAT_FAMILIES[family], chat_conversations(20, seed=7)
    for generation in (True, False):
        want = transformers_render(template, conversations, generation)
        assert _render(render_bin, template, conversations, generation, tmp_path) == want


def test_bad_messages_and_templates_are_one_line(render_bin: Path, tmp_path: Path) -> None:
    bad = ["hello", [], [{"content": "x"}], [{"role": "user", "content": 3}]]
    got = _render(render_bin, LLAMA3, bad, True, tmp_path)
    assert [g["error"].split(" must ")[0] for g in got] == [
        "messages", "messages", "message 0", 'message 0: "content"',
    ]  # fmt: skip
    refusing = "{{ raise_exception('only user turns, please') }}"
    got = _render(render_bin, refusing, [[{"role": "user", "content": "x"}]], True, tmp_path)
    assert got == [{"error": "the chat template refused these messages: only user turns, please"}]
    request = {"stored": json.dumps({"template": "{% for %}"}), "conversations": []}
    (tmp_path / "request.json").write_text(json.dumps(request))
    res = subprocess.run(
        [str(render_bin), str(tmp_path / "request.json")], capture_output=True, text=True
    )
    assert res.returncode == 1
    assert res.stderr.startswith("error: the chat template does not parse (")
    assert len(res.stderr.strip().splitlines()) == 1


def test_serve_answers_messages_with_the_python_runners_tokens(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    pte = artifacts.target("gemma3_text").pte
    runner = TextLLMRunner.from_pte(pte)
    conversations = [  # short: the tiny target's context is 96 tokens
        [{"role": "user", "content": "hi there"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "été?"}],
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    ]
    want = [runner.chat(c, 6, ignore_eos=True).token_ids for c in conversations]
    lines = [json.dumps({"messages": c, "max_new_tokens": 6, "ignore_eos": True})
             for c in conversations]  # fmt: skip
    lines.append(json.dumps({"messages": [{"role": "user"}], "prompt": "x"}))
    res = subprocess.run(
        [str(runner_bin), "--target", str(pte), "--serve"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in res.stdout.splitlines()]
    assert [a["token_ids"] for a in answers[:-1]] == want
    assert "exactly one of the fields prompt, prompt_ids and messages" in answers[-1]["error"]
