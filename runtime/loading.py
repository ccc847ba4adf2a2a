"""Build runners from user-facing settings: ``.pte`` files (performance mode) or checkpoint
folders run in torch (reference mode). Shared by the CLI, scripts and tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from etspec.contract import DEFAULT_KV_STRATEGY
from etspec.errors import EtspecError
from etspec.runtime.program import Program, PteProgram, load_pair
from etspec.runtime.runner import TextLLMRunner
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.registry import DEFAULT_DRAFT_METHOD, DRAFT_METHODS, draft_method
from etspec.runtime.speculative.settings import TreeSettings
from etspec.runtime.speculative.shapes import TreePolicy


@dataclass(frozen=True)
class RunnerSpec:
    target: Path
    draft: Path | None = None
    draft_method: str = DEFAULT_DRAFT_METHOD  # a name in speculative/registry.py
    tree: TreeSettings = field(default_factory=TreeSettings)
    kv_strategy: str = DEFAULT_KV_STRATEGY
    # The EAGLE-3 draft attends to this many latest positions only (an ablation); None: all.
    draft_window: int | None = None
    # prompt-lookup: (shortest, longest) n-gram matched; None: the runner's default.
    ngram: tuple[int | None, int | None] = (None, None)
    # XNNPACK packs each weight once for all methods (None: on unless
    # ETSPEC_XNNPACK_WEIGHT_CACHE=0); runtime/xnnpack.py.
    weight_cache: bool | None = None
    reference: bool = False  # target/draft are checkpoint folders run eagerly
    device: str = "cpu"
    # Static shapes of reference-mode programs (a .pte carries its own).
    max_seq: int = 512
    prefill_chunk: int = 32
    verify_widths: tuple[int, ...] = (4, 8)
    dtype: str = "fp32"  # reference mode: the weight recipe (models/quantize.py)

    @property
    def method(self) -> DraftMethod:
        return draft_method(self.draft_method)

    @property
    def speculative(self) -> bool:
        return self.method.speculates(self)


def load_programs(spec: RunnerSpec) -> tuple[Program, Program | None]:
    """The target program and, for a method with a draft program of its own (EAGLE-3), the
    draft program of ``spec``."""
    method = spec.method
    needs_draft_file = method.draft_program and spec.draft is not None
    if spec.reference:
        from etspec.runtime.eager import eager_draft, eager_target

        t = eager_target(
            spec.target,
            max_seq=spec.max_seq,
            prefill_chunk=spec.prefill_chunk,
            verify_width=max(spec.verify_widths),
            narrow_verify_widths=spec.verify_widths,
            device=spec.device,
            dtype=spec.dtype,
            **(method.eager_target_options(spec) if spec.speculative else {}),
        )
        d = eager_draft(spec.draft, t, device=spec.device) if needs_draft_file else None
        return t, d
    if spec.device != "cpu":
        raise EtspecError(
            "a .pte runs on the backend it was exported for; --device applies to --reference"
        )
    if needs_draft_file:
        assert spec.draft is not None
        return load_pair(spec.target, spec.draft, spec.weight_cache)
    return PteProgram.load(spec.target, expect="target", weight_cache=spec.weight_cache), None


# RunnerSpec fields a method must claim (``DraftMethod.options``), with their flags.
_METHOD_OPTIONS = {"ngram": "--min-ngram/--max-ngram", "draft_window": "--draft-window"}


def _check_method(spec: RunnerSpec) -> None:
    method = spec.method
    method.check(spec)
    defaults = RunnerSpec(spec.target)
    for name, flag in _METHOD_OPTIONS.items():
        if getattr(spec, name) != getattr(defaults, name) and name not in method.options:
            owner = next(m.name for m in DRAFT_METHODS.values() if name in m.options)
            raise EtspecError(
                f"{flag} applies to --draft-method {owner}; add --draft-method {owner} or "
                f"drop {flag}"
            )


def load_runners(spec: RunnerSpec) -> tuple[TextLLMRunner, TextLLMRunner | None]:
    """(target-only runner, speculative runner or None); both share one target program."""
    _check_method(spec)
    target, draft = load_programs(spec)
    base = TextLLMRunner(target)
    if not spec.speculative:
        return base, None
    return base, speculative_runner(spec, base, draft, spec.tree)


def speculative_runner(
    spec: RunnerSpec,
    base: TextLLMRunner,
    draft: Program | None,
    tree: TreeSettings | TreePolicy,
) -> TextLLMRunner:
    """A speculative runner over ``base``'s target program (loaded once, shared)."""
    from etspec.runtime.speculative.generator import SpeculativeTokenGenerator

    meta = base.meta
    target = base.target
    runner = spec.method.runner(spec, target, draft)
    policy = tree.policy(meta, runner.branching) if isinstance(tree, TreeSettings) else tree
    gen = SpeculativeTokenGenerator(runner, meta, policy, spec.kv_strategy)
    return TextLLMRunner(target, gen, base.tokenizer)


def load_systems(
    spec: RunnerSpec,
    trees: dict[str, TreeSettings | TreePolicy],
    draft_windows: Sequence[int] = (),
) -> tuple[TextLLMRunner, dict[str, TextLLMRunner]]:
    """Target-only runner plus one speculative runner per named tree setting or fixed
    shape, all over one loaded pair; with ``draft_windows``, the first tree again per window
    W as ``"<tree> wW"``, its draft attending to the last W positions only."""
    _check_method(spec)
    if draft_windows and ("draft_window" not in spec.method.options or spec.draft is None):
        raise EtspecError("draft windows truncate an EAGLE-3 draft's attention; give --draft")
    target, draft = load_programs(spec)
    base = TextLLMRunner(target)
    if not spec.speculative:
        return base, {}
    systems = {name: speculative_runner(spec, base, draft, t) for name, t in trees.items()}
    if draft_windows and trees:
        name, tree = next(iter(trees.items()))
        for w in draft_windows:
            windowed = replace(spec, draft_window=w)
            systems[f"{name} w{w}"] = speculative_runner(windowed, base, draft, tree)
    return base, systems
