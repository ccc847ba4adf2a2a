"""Chat templates: stored at export, rendered as transformers renders them, tokenized without
a second <bos>; `runner.chat`, `generate --messages`, `etspec chat` and their refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiny import (
    CHAT_FAMILIES,
    CHATML,
    GEMMA_CHAT_TEMPLATE,
    LLAMA3,
    chat_conversations,
    transformers_render,
    write_chat_template,
)

from etspec.errors import CheckpointError
from etspec.models.checkpoint import read_chat_template
from etspec.runtime.chat import ChatTemplate, check_messages
from etspec.runtime.results import GenerationError
from etspec.runtime.runner import TextLLMRunner

CONVERSATIONS = [
    [{"role": "user", "content": "Translate to French: good morning"}],
    [
        {"role": "system", "content": "Answer in one word. \u00e9t\u00e9 \u65e5\u672c"},
        {"role": "user", "content": "  Capital of France?  "},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": 'And of Japan? "quoted" {{ not code }}'},
    ],
]
SPECIAL = {"bos_token": "<bos>", "eos_token": "<eos>"}


@pytest.mark.parametrize(
    "template", [GEMMA_CHAT_TEMPLATE, CHATML, LLAMA3], ids=["gemma3", "chatml", "llama3"]
)
@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["one turn", "four turns"])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_rendering_is_transformers(template: str, messages, generation_prompt: bool) -> None:  # type: ignore[no-untyped-def]
    from transformers.utils.chat_template_utils import render_jinja_template

    want, _ = render_jinja_template(
        conversations=[messages], chat_template=template,
        add_generation_prompt=generation_prompt, **SPECIAL,
    )  # fmt: skip
    got = ChatTemplate(template, SPECIAL).render(messages, add_generation_prompt=generation_prompt)
    assert got == want[0]


@pytest.mark.parametrize("family", CHAT_FAMILIES)
def test_twenty_conversations_render_as_transformers(family: str) -> None:
    template, conversations = CHAT_FAMILIES[family], chat_conversations(20, seed=7)
    for generation_prompt in (True, False):
        want = transformers_render(template, conversations, generation_prompt)
        chat = ChatTemplate(template, SPECIAL)
        assert [chat.render(c, generation_prompt) for c in conversations] == want


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ("hello", "messages must be a non-empty list"),
        ([], "messages must be a non-empty list"),
        ([{"content": "x"}], 'message 0 must be an object with a "role"'),
        (["x"], 'message 0 must be an object with a "role"'),
        ([{"role": "user", "content": 3}], 'message 0: "content" must be text'),
    ],
)
def test_malformed_messages_are_one_line(messages, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GenerationError, match=words):
        check_messages(messages)


def test_a_template_that_refuses_the_messages_says_why() -> None:
    template = ChatTemplate(GEMMA_CHAT_TEMPLATE, SPECIAL)
    twice = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(GenerationError, match="refused these messages: Conversation roles must"):
        template.render(twice)
    with pytest.raises(GenerationError, match="the chat template does not parse"):
        ChatTemplate("{% for %}", {}).render(CONVERSATIONS[0])


def test_the_sandbox_keeps_a_template_from_python() -> None:
    sneaky = ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__ }}", {})
    with pytest.raises(GenerationError):
        sneaky.render(CONVERSATIONS[0])


def test_the_template_is_read_where_transformers_finds_it(tmp_path: Path) -> None:
    assert read_chat_template(tmp_path) is None
    write_chat_template(tmp_path, "T1")
    assert json.loads(read_chat_template(tmp_path) or b"") == {
        "template": "T1", "bos_token": "<bos>", "eos_token": "<eos>",
    }  # fmt: skip
    config = {"chat_template": [{"name": "tool_use", "template": "T2"},
                                {"name": "default", "template": "T3"}],
              "bos_token": {"content": "<s>"}}  # fmt: skip
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert json.loads(read_chat_template(tmp_path) or b"")["template"] == "T3"
    assert json.loads(read_chat_template(tmp_path) or b"")["bos_token"] == "<s>"
    (tmp_path / "chat_template.jinja").write_text("T4")
    assert json.loads(read_chat_template(tmp_path) or b"")["template"] == "T4"
    (tmp_path / "chat_template.jinja").unlink()
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": 7}))
    with pytest.raises(CheckpointError, match="chat_template must be the template's text"):
        read_chat_template(tmp_path)


def test_chat_generates_after_the_rendered_conversation(artifacts) -> None:  # type: ignore[no-untyped-def]
    """The exported target carries its checkpoint's template; `chat` prompts with the
    rendered text tokenized as transformers does (add_special_tokens=False: one <bos>)."""
    from tokenizers import Tokenizer
    from transformers.utils.chat_template_utils import render_jinja_template

    case = artifacts.target("gemma3_text")
    runner = TextLLMRunner.from_pte(case.pte)
    messages = [
        {"role": "system", "content": "def"},
        {"role": "user", "content": "the 日本"},
        {"role": "assistant", "content": "abc"},
        {"role": "user", "content": "12"},
    ]
    (text,), _ = render_jinja_template(
        conversations=[messages], chat_template=GEMMA_CHAT_TEMPLATE, add_generation_prompt=True,
        **SPECIAL,
    )  # fmt: skip
    tok = Tokenizer.from_file(str(case.checkpoint / "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids
    assert ids[0] == tok.token_to_id("<bos>") and ids[1] != ids[0]
    out = runner.chat(messages, 5, ignore_eos=True)
    assert out.prompt_ids == ids
    assert out.token_ids == runner.generate(ids, 5, ignore_eos=True).token_ids


def test_a_target_without_a_template_refuses_chat_in_one_line(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from etspec.contract import message

    pte = artifacts.target("llama_bpe_text").pte
    with pytest.raises(GenerationError, match="carries no chat template"):
        TextLLMRunner.from_pte(pte).chat(CONVERSATIONS[0], 4)
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps({"messages": CONVERSATIONS[0]}))
    for args in (["generate", "--messages", str(msgs)], ["chat"]):
        cmd = [sys.executable, "-m", "etspec", *args, "--target", str(pte)]
        proc = subprocess.run(cmd, input="hi\n", capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines() == [f"error: {message('no_chat_template')}"]


def test_generate_messages_and_chat_at_the_command_line(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pte = artifacts.target("gemma3_text").pte
    runner = TextLLMRunner.from_pte(pte)
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(CONVERSATIONS[0]))
    run = [sys.executable, "-m", "etspec"]
    proc = subprocess.run([*run, "generate", "--target", str(pte), "--messages", str(msgs),
                           "--max-new-tokens", "4", "--json"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    want = runner.chat(CONVERSATIONS[0], 4)
    got = json.loads(proc.stdout)
    assert got["token_ids"] == want.token_ids
    assert got["stats"]["prompt_tokens"] == len(want.prompt_ids)
    msgs.write_text('[{"role": 3}]')
    proc = subprocess.run([*run, "generate", "--target", str(pte), "--messages", str(msgs)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        == f'error: {msgs}: message 0 must be an object with a "role" (a string)'
    )
    # Two turns, a /reset, one more: three answers, streamed, no error.
    proc = subprocess.run([*run, "chat", "--target", str(pte), "--max-new-tokens", "3"],
                          input="hello\nagain\n/reset\nbonjour\n", capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout.count("\n") >= 3
    proc = subprocess.run([*run, "inspect", str(pte)], capture_output=True, text=True, timeout=300)
    assert f"  chat template: {len(GEMMA_CHAT_TEMPLATE)} characters" in proc.stdout
