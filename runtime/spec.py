"""What a run is asked to do, as plain data: ``RunnerSpec`` (which artifacts, which drafter
and its options, the KV strategy) and ``TreeSettings`` (the ``--tree`` mode and its knobs).

Every option is declared once, in ``contract.RUN_SETTINGS``: both classes check themselves
against it when they are made (a value below its minimum; an option whose owner, a tree
mode or a draft method, is not the one asked for), so a library caller, the CLI and the C++
runner refuse the same things with the same words. ``flags`` turns them back into the
command line both CLIs parse.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from etspec.contract import (
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_DRAFT_METHOD,
    DEFAULT_KV_STRATEGY,
    DEFAULT_VERIFY_WIDTHS,
    RUN_SETTINGS,
    TREE_MODES,
    RunSetting,
    message,
)
from etspec.errors import EtspecError


def _settings(group: str) -> dict[str, RunSetting]:
    return {s.name: s for s in RUN_SETTINGS if s.group == group}


def _given(obj: Any, group: str) -> Iterator[tuple[RunSetting, Any]]:
    """The settings of ``obj`` (a TreeSettings or RunnerSpec) that are set, with values."""
    for name, setting in _settings(group).items():
        value = obj.options.get(name) if group == "method" else getattr(obj, name)
        if value is not None and value != setting.default:
            yield setting, value


def check_value(setting: RunSetting, value: Any) -> None:
    """Refuse ``value`` below the setting's minimum (``setting_minimum``)."""
    if setting.minimum is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < setting.minimum:
        raise EtspecError(
            message("setting_minimum", option=setting.flag, minimum=setting.minimum, value=value)
        )


def check_tree_owners(given: Collection[str], modes: Collection[str]) -> None:
    """Refuse a tree option (a flag of ``given``) that no ``--tree`` mode in ``modes``
    shapes: it would be ignored without a word."""
    for flag in given:
        setting = next(s for s in RUN_SETTINGS if s.flag == flag)
        if setting.tree_modes and not set(setting.tree_modes) & set(modes):
            mode = setting.tree_modes[0]
            raise EtspecError(message("knob_needs_mode", option=flag, mode=mode))


def flags(obj: Any, group: str) -> list[str]:
    """The command-line flags that make ``obj``'s set values (both CLIs parse them)."""
    out: list[str] = []
    for setting, value in _given(obj, group):
        if setting.kind == "flag":
            out += [setting.flag] if value == setting.flag_value else []
        else:
            out += [setting.flag, str(value)]
    return out


@dataclass(frozen=True)
class TreeSettings:
    """The ``--tree`` options: a mode and the knobs it reads (``contract.RUN_SETTINGS``
    fields ``tree.*``); ``runtime/speculative/settings.py`` builds the policy."""

    mode: str = "auto"
    num_spec_tokens: int = DEFAULT_CHAIN_LENGTH  # chain length
    static_tree: str | None = None  # D3xBF2 / N8 / JSON choices (default: N fills K - 1)
    depth: int | None = None  # dynamic: expansion passes (EAGLE repo); default from K
    num_steps: int | None = None  # dynamic: SGLang's name for depth + 1
    topk: int | None = None
    total_tokens: int | None = None  # dynamic: nodes incl. the root; default K

    def __post_init__(self) -> None:
        if self.mode not in TREE_MODES:
            raise EtspecError(
                message(
                    "unknown_choice", what="--tree", value=self.mode, choices=", ".join(TREE_MODES)
                )
            )
        if self.depth is not None and self.num_steps is not None:
            raise EtspecError(
                message("knob_twice", first="--depth", second="--num-steps", knob="depth")
            )
        given = dict(_given(self, "tree"))
        for setting, value in given.items():
            check_value(setting, value)
        check_tree_owners([s.flag for s in given], [self.mode])

    @property
    def dynamic_depth(self) -> int | None:
        """The dynamic tree's expansion passes, however given (depth, or num_steps - 1)."""
        return self.depth if self.num_steps is None else self.num_steps - 1

    @classmethod
    def owned(cls, mode: str, knobs: dict[str, Any]) -> TreeSettings:
        """Settings of ``mode`` from ``knobs`` (field -> value) given for several modes at
        once (a bench runs several): those ``mode`` does not read are left out."""
        tree = _settings("tree")
        keep = {
            k: v for k, v in knobs.items() if not tree[k].tree_modes or mode in tree[k].tree_modes
        }
        return cls(mode=mode, **keep)

    def flags(self) -> list[str]:
        """``--tree MODE`` and the knobs set (what both CLIs parse back into these)."""
        knobs = flags(self, "tree")
        return knobs if self.mode != "auto" else ["--tree", "auto", *knobs]


@dataclass(frozen=True)
class RunnerSpec:
    """Which artifacts to load and how to draft with them (``runtime/runner.py``'s
    ``load_runners`` makes runners from it)."""

    target: Path
    draft: Path | None = None
    draft_method: str = DEFAULT_DRAFT_METHOD  # a name in speculative/registry.py
    tree: TreeSettings = field(default_factory=TreeSettings)
    kv_strategy: str = DEFAULT_KV_STRATEGY
    # The draft method's own options (``method.*`` rows of contract.RUN_SETTINGS, by name:
    # ``{"min_ngram": 2}``); an option not given takes the method's default.
    options: Mapping[str, Any] = field(default_factory=dict)
    # XNNPACK packs each weight once for all methods (None: on unless
    # ETSPEC_XNNPACK_WEIGHT_CACHE=0); runtime/xnnpack.py.
    weight_cache: bool | None = None
    reference: bool = False  # target/draft are checkpoint folders run eagerly
    device: str = "cpu"
    # Static shapes of reference-mode programs (a .pte carries its own).
    max_seq: int = 512
    prefill_chunk: int = 32
    verify_widths: tuple[int, ...] = DEFAULT_VERIFY_WIDTHS
    dtype: str = "fp32"  # reference mode: the weight recipe (models/quantize.py)

    def __post_init__(self) -> None:
        known = _settings("method")
        for name in self.options:
            if name not in known:
                raise EtspecError(
                    message(
                        "unknown_choice",
                        what="draft method option",
                        value=name,
                        choices=", ".join(known),
                    )
                )
        for setting, value in [*_given(self, "spec"), *_given(self, "method")]:
            check_value(setting, value)
            owners = setting.draft_methods
            if owners and self.draft_method not in owners:
                raise EtspecError(
                    message(
                        "option_needs_method",
                        option=setting.flag,
                        owner=owners[0],
                    )
                )

    def flags(self) -> list[str]:
        """The C++ runner's flags for the draft method's options and the KV strategy (the
        paths and the tree are passed apart)."""
        return [*flags(self, "spec"), *flags(self, "method")]

    def option(self, name: str) -> Any:
        """The draft method option ``name`` (a ``method.*`` setting), None if not given."""
        return self.options.get(name)
