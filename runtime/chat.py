"""Chat templates: a conversation (``messages``) as the text an instruct model was trained on.

The template is the checkpoint's own, stored in the target artifact at export
(``contract.CHAT_TEMPLATE``), and rendered as transformers' ``apply_chat_template`` renders
it: Jinja in a sandbox that cannot reach Python (``ImmutableSandboxedEnvironment``, blocks
trimmed), with its ``tojson``, ``raise_exception``, ``strftime_now`` and the special tokens
(``bos_token``, ...) in scope, and the messages passed as plain JSON data. The rendered text
already holds the special tokens the template writes, so it is tokenized without the
tokenizer's own (``Tokenizer.encode(..., special=False)``), as transformers does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar

from etspec.contract import message
from etspec.runtime.prompt import prompt_ids
from etspec.runtime.results import GenerationError
from etspec.runtime.tokenizer import Tokenizer

# The special tokens a template may name, as tokenizer_config.json spells them.
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


@dataclass(frozen=True)
class ChatTemplate:
    """A checkpoint's chat template and the special tokens it may write."""

    template: str
    special: Mapping[str, str]

    @classmethod
    def from_json(cls, data: bytes) -> ChatTemplate:
        """The artifact's ``chat_template`` constant (UTF-8 JSON)."""
        try:
            entry = json.loads(data.decode("utf-8"))
            template = entry["template"]
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise GenerationError(message("chat_template_unreadable", reason=e)) from None
        if not isinstance(template, str):
            raise GenerationError(message("chat_template_not_text"))
        special = {k: entry[k] for k in SPECIAL_NAMES if isinstance(entry.get(k), str)}
        return cls(template, special)

    @cached_property
    def compiled(self) -> Any:
        """The template compiled once (a syntax error: one line naming it)."""
        import jinja2

        try:
            return _environment().from_string(self.template)
        except jinja2.TemplateError as e:
            raise GenerationError(message("chat_template_syntax", reason=e)) from None

    def render(self, messages: Any, add_generation_prompt: bool = True) -> str:
        """``messages`` (a list of ``{"role": ..., "content": ...}``) as the model's text;
        ``add_generation_prompt``: ending where the assistant's answer starts."""
        import jinja2

        chat = check_messages(messages)
        try:
            return str(
                self.compiled.render(
                    messages=chat,
                    tools=None,
                    documents=None,
                    add_generation_prompt=add_generation_prompt,
                    **self.special,
                )
            )
        except jinja2.TemplateError as e:  # raise_exception(...) in the template, or misuse
            raise GenerationError(message("chat_template_refused", reason=e)) from None


def chat_ids(
    template: ChatTemplate | None, tokenizer: Tokenizer | None, messages: Any, vocab: int
) -> list[int]:
    """The prompt ids of ``messages`` rendered by ``template`` up to the assistant's turn
    (refused in one line without a template or a tokenizer)."""
    if template is None:
        raise GenerationError(message("no_chat_template"))
    if tokenizer is None:
        raise GenerationError(message("no_tokenizer"))
    text = template.render(messages)  # it writes <bos> itself
    return prompt_ids(tokenizer.encode(text, special=False), None, vocab)


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as plain JSON data (what the sandboxed template may see), or a one-line
    error naming what is wrong."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise GenerationError(message("messages_not_list"))
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise GenerationError(message("message_no_role", index=i))
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise GenerationError(
                message("message_bad_content", index=i, kind=type(content).__name__)
            )
        out.append(_plain(m))
    return out


def _plain(value: Any) -> Any:
    """JSON data only (str, numbers, bools, None, lists, objects): nothing with methods
    reaches the template."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return f"<{type(value).__name__}>"


def _environment() -> Any:
    """transformers' template environment (``utils/chat_template_utils.py``)."""
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        # `{% generation %}...{% endgeneration %}` marks the assistant's tokens for
        # training masks; rendering keeps its body as it is.
        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(
                lineno
            )

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(text: str) -> None:
        raise jinja2.exceptions.TemplateError(text)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    class Namespace(jinja2.utils.Namespace):  # type: ignore[misc]
        # No underscore-prefixed attributes: nothing reaches CPython's internals.
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                Namespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            Namespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"a chat template cannot store {name!r} on a namespace"
                )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, "jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["namespace"] = Namespace
    return env
