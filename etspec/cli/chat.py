"""``etspec chat``: a conversation at the terminal through the target's chat template."""

from __future__ import annotations

import sys
from typing import Any

import click

from etspec.cli.app import main, option, user_errors
from etspec.cli.runner_options import runner_options, runner_spec, setting_options
from etspec.contract import DEFAULT_MAX_NEW_TOKENS, message
from etspec.errors import EtspecError

HELP_LINE = "(an empty line or /exit ends; /reset starts a new conversation)"


@main.command()
@runner_options
@click.option("--system", default=None, help="A system message that opens the conversation.")
@option(
    "--max-new-tokens",
    default=DEFAULT_MAX_NEW_TOKENS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens per answer at most.",
)
@setting_options("sampling")
@user_errors
def chat(**kw: Any) -> None:
    """Talk with an instruct target: each line you type is a user turn, rendered with the
    whole conversation by the target's chat template; answers stream as they come."""
    from etspec.runtime.chat import chat_ids
    from etspec.runtime.results import GenerationError
    from etspec.runtime.runner import load_runners
    from etspec.runtime.sampling import SamplingConfig

    sampling = SamplingConfig(kw["temperature"], kw["top_k"], kw["top_p"], kw["seed"])
    sampling.check()
    base, speculative = load_runners(runner_spec(kw))
    runner = speculative or base
    opening = [{"role": "system", "content": kw["system"]}] if kw["system"] else []
    if runner.chat_template is None:  # before the first line is typed
        raise EtspecError(message("no_chat_template"))
    messages = list(opening)
    interactive = sys.stdin.isatty()
    if interactive:
        click.echo(HELP_LINE, err=True)
    while True:
        if interactive:
            click.echo("> ", nl=False, err=True)
        line = sys.stdin.readline()
        text = line.rstrip("\n")
        if not line or not text.strip() or text.strip() == "/exit":
            return
        if text.strip() == "/reset":
            messages = list(opening)
            continue
        turn = [*messages, _user(text)]
        try:
            ids = chat_ids(runner.chat_template, runner.tokenizer, turn, runner.meta.vocab_size)
            room = runner.meta.max_context - len(ids)
            if room < 2:
                raise GenerationError(
                    f"the conversation ({len(ids)} tokens) fills the context of "
                    f"{runner.meta.max_context}; /reset starts a new one"
                )
            # The turns before are in the KV cache already: only the new turn is prefilled.
            result = runner.generate(
                ids,
                min(kw["max_new_tokens"], room - 1),
                sampling,
                callback=_stream,
                reuse_prefix=True,
            )
        except GenerationError as e:  # this turn only: the conversation goes on
            click.echo(f"error: {e}", err=True)
            continue
        click.echo("")
        messages = [*turn, {"role": "assistant", "content": result.text}]


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _stream(ids: list[int], piece: str) -> None:
    if piece:
        click.echo(piece, nl=False)
        sys.stdout.flush()
