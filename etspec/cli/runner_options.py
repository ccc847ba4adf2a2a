"""The options of the commands that run an artifact (generate, validate, bench) and the
``RunnerSpec`` they make. The run settings are ``contract.RUN_SETTINGS`` rows, made into
options here: a new setting is a row there, not a new option here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from etspec.cli.app import F, option, verbose_option
from etspec.contract import (
    DEFAULT_VERIFY_WIDTHS,
    DTYPES,
    RUN_SETTINGS,
    SEED_MAX,
    RunSetting,
    run_setting,
)
from etspec.errors import EtspecError
from etspec.runtime.loading import check_draftless
from etspec.runtime.spec import RunnerSpec, TreeSettings, check_tree_owners
from etspec.runtime.speculative.registry import DRAFT_METHODS, aliases


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


def setting_option(setting: RunSetting) -> Callable[[F], F]:
    """The click option of one ``contract.RUN_SETTINGS`` row. Values are checked by
    ``RunnerSpec``/``TreeSettings`` (as for a library caller and in C++), not by click."""
    kw: dict[str, Any] = {"help": setting.help, "default": setting.default}
    if setting.kind == "flag":
        kw.update(is_flag=True, default=False)
    elif setting.kind == "method":
        kw.update(type=DraftMethodChoice(), callback=lambda _c, _p, v: aliases().get(v, v))
        kw["help"] = "; ".join(f"{m.name}: {m.help}" for m in DRAFT_METHODS.values()) + "."
    elif setting.kind == "choice":
        kw["type"] = click.Choice(setting.choices)
    elif setting.kind == "seed":
        kw["type"] = click.IntRange(0, SEED_MAX)
    else:
        kw["type"] = {"int": int, "float": float, "text": str}[setting.kind]
    kw["show_default"] = setting.default is not None
    return option(setting.flag, **kw)


def setting_options(*groups: str) -> Callable[[F], F]:
    """The options of every ``RUN_SETTINGS`` row in ``groups`` (tree, spec, sampling)."""

    def decorate(fn: F) -> F:
        for setting in reversed(RUN_SETTINGS):
            if setting.group in groups:
                fn = setting_option(setting)(fn)
        return fn

    return decorate


no_weight_cache_option = setting_option(run_setting("--no-weight-cache"))


def runner_options(fn: F) -> F:
    """Options shared by generate, validate and bench: which artifacts, how to speculate."""
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
        setting_options("spec", "method", "tree"),
        verbose_option,
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
            default=",".join(map(str, DEFAULT_VERIFY_WIDTHS)),
            show_default=True,
            help="Reference mode verify widths (comma-separated), as export's.",
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


def settings_of(kw: dict[str, Any], group: str) -> dict[str, Any]:
    """The ``RUN_SETTINGS`` values of ``group`` the command got, by field name (None: not
    given)."""
    out = {}
    for setting in RUN_SETTINGS:
        if setting.group == group:
            value = kw[setting.dest]
            out[setting.name] = (
                (setting.flag_value if value else None) if setting.kind == "flag" else value
            )
    return out


def runner_spec(kw: dict[str, Any], modes: Sequence[str] = ()) -> RunnerSpec:
    """The ``RunnerSpec`` of a command's options; ``modes``: the tree modes a bench runs
    (the tree options must shape one of them), else the ``--tree`` mode."""
    knobs = settings_of(kw, "tree")
    mode = knobs.pop("mode")
    try:
        if modes:
            given = [
                s.flag for s in RUN_SETTINGS if s.group == "tree" and knobs.get(s.name) is not None
            ]
            check_tree_owners(given, modes)
        spec = RunnerSpec(
            target=kw["target"],
            draft=kw["draft"],
            tree=TreeSettings.owned(mode, knobs) if modes else TreeSettings(mode, **knobs),
            reference=kw["reference"],
            device=kw["device"],
            max_seq=kw["max_seq"],
            verify_widths=widths(kw["verify_width"]),
            dtype=kw["dtype"],
            options={k: v for k, v in settings_of(kw, "method").items() if v is not None},
            **settings_of(kw, "spec"),
        )
        check_draftless(spec)
        return spec
    except EtspecError as e:  # a usage error, as click's own
        raise click.UsageError(str(e)) from None


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
