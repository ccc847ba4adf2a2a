"""The options of the commands that run an artifact (generate, validate, bench) and the
``RunnerSpec`` they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from etspec.cli.app import F, no_weight_cache_option, option, verbose_option
from etspec.contract import (
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_KV_STRATEGY,
    DTYPES,
    KV_STRATEGIES,
    TREE_KNOB_MODES,
    message,
)
from etspec.errors import EtspecError
from etspec.runtime.loading import RunnerSpec
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.registry import DEFAULT_DRAFT_METHOD, DRAFT_METHODS, aliases
from etspec.runtime.speculative.settings import TREE_MODES, TreeSettings


class DraftMethodChoice(click.Choice):
    """The registered draft methods and their aliases, read when the option is parsed, so a
    method registered after import (a plug-in) is a valid choice too."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return (*DRAFT_METHODS, *aliases())

    @choices.setter
    def choices(self, _value: object) -> None:
        pass


def parse_ids(value: str) -> list[int] | list[list[int]]:
    """``1,2,3``; ``;`` separates sequences (a batch, which generate then refuses clearly)."""
    shown = value if len(value) <= 40 else value[:40] + "..."
    try:
        rows = [[int(t) for t in row.split(",") if t.strip()] for row in value.split(";")]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated token ids, got {shown!r}") from None
    if len(rows) > 1 and any(not row for row in rows):  # "1;": nothing after a separator
        raise click.BadParameter(f"expected comma-separated token ids, got {shown!r}")
    return rows[0] if len(rows) == 1 else rows


def runner_options(fn: F) -> F:
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
            type=DraftMethodChoice(),
            default=DEFAULT_DRAFT_METHOD,
            show_default=True,
            callback=lambda _ctx, _param, v: aliases().get(v, v),
            help="; ".join(f"{m.name}: {m.help}" for m in DRAFT_METHODS.values()) + ".",
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
            type=click.Choice(TREE_MODES),
            default="auto",
            show_default=True,
            help="Proposal shape; auto picks one from measured costs and acceptance.",
        ),
        option(
            "--num-spec-tokens",
            default=DEFAULT_CHAIN_LENGTH,
            show_default=True,
            type=click.IntRange(min=1),
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
            type=click.Choice(KV_STRATEGIES),
            default=DEFAULT_KV_STRATEGY,
            show_default=True,
        ),
        verbose_option,
        no_weight_cache_option,
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


def widths(value: str) -> tuple[int, ...]:
    try:
        widths = tuple(sorted({int(v) for v in str(value).split(",") if v.strip()}))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated widths, got {value!r}") from None
    if not widths or min(widths) < 1:
        raise click.BadParameter(f"verify widths must be positive, got {value!r}")
    return widths


def check_tree_knobs(kw: dict[str, Any], modes: set[str]) -> None:
    """Refuse a tree option (``contract.TREE_KNOB_MODES``) given when no ``--tree`` mode in
    ``modes`` uses it."""
    dest = {o: p.name for p in click.get_current_context().command.params for o in p.opts}
    for name, mode in TREE_KNOB_MODES:
        if kw.get(dest[name]) is not None and mode not in modes:
            raise click.UsageError(message("knob_needs_mode", option=name, mode=mode))


def runner_spec(kw: dict[str, Any]) -> RunnerSpec:
    # --depth (EAGLE) and --num-steps (SGLang) name one knob: DynamicTree translates.
    given = {k: kw[k] for k in ("depth", "num_steps", "topk", "total_tokens")}
    knobs = DynamicTree.knobs({k: v for k, v in given.items() if v is not None})
    tree = TreeSettings(
        mode=kw["tree_mode"],
        num_spec_tokens=kw["num_spec_tokens"],
        static_tree=kw["static_tree"],
        depth=knobs.get("depth"),
        topk=knobs.get("topk"),
        total_tokens=knobs.get("total_tokens"),
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
        verify_widths=widths(kw["verify_width"]),
        dtype=kw["dtype"],
    )


def draft_windows(value: str | None) -> tuple[int, ...]:
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
