"""The systems a bench run compares: etspec's own over one loaded pair (``load_systems``)
and those it adds beside them, the eager reference program, the transformers peers, the
C++ runner and llama.cpp, from the paths the user gave."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from etspec.contract import RUN_SETTINGS, RunSetting, TargetMetadata, run_setting
from etspec.errors import EtspecError
from etspec.runtime.loading import load_programs, method_of, speculates
from etspec.runtime.runner import TextLLMRunner, speculative_runner
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.registry import draft_method
from etspec.runtime.speculative.shapes import TreePolicy
from etspec.tools.peers.base import OutsidePeer


@dataclass(frozen=True)
class OutsideSystems:
    """Paths of what to run beside the .pte pair (None: not run)."""

    eager_target: Path | None = None  # the target's checkpoint folder
    eager_draft: Path | None = None  # the draft's, for an EAGLE-3 pair
    hf_target: Path | None = None  # transformers generate on the target's HF checkpoint
    hf_assistant: Path | None = None  # ... assisted by this small causal LM
    cpp_runner: Path | None = None  # the C++ runner binary
    llama_cpp: Path | None = None  # the target's source GGUF

    def check(self, spec: RunnerSpec) -> float:
        """Refuse combinations that cannot run, before anything loads; returns the load
        average (with --llama-cpp a busy machine is refused: its threads busy-wait)."""
        load = os.getloadavg()[0]
        peers = {"--hf-target": self.hf_target, "--cpp-runner": self.cpp_runner,
                 "--llama-cpp": self.llama_cpp, "--eager-target": self.eager_target}  # fmt: skip
        for flag, given in peers.items():
            if given is not None and spec.reference:
                raise EtspecError(f"{flag} joins a .pte run; drop --reference")
        if self.eager_draft is not None and self.eager_target is None:
            raise EtspecError("--eager-draft needs --eager-target (the target's checkpoint)")
        if self.hf_assistant is not None and self.hf_target is None:
            raise EtspecError("--hf-assistant needs --hf-target (the target's HF checkpoint)")
        eagle3_pair = method_of(spec).draft_program and spec.draft is not None
        if self.eager_target is not None and eagle3_pair and self.eager_draft is None:
            raise EtspecError(
                "give --eager-draft (the draft's checkpoint folder) with --eager-target"
            )
        if self.llama_cpp is None:
            return load
        from etspec.tools.peers.llama_cpp import check_idle

        if not self.llama_cpp.is_file():
            raise EtspecError(f"{self.llama_cpp}: no such GGUF file; give the target's source GGUF")
        return check_idle(load)


@dataclass
class Assembled:
    systems: dict[str, Any] = field(default_factory=dict)
    # Per system, the system whose greedy output it must equal (default: target-only).
    baselines: dict[str, str | None] = field(default_factory=dict)

    @property
    def in_process(self) -> bool:
        """Whether any of them shares this process (and its peak RSS); the C++ runner's
        systems run in processes of their own."""
        from etspec.tools.peers.cpp_runner import CppRunner

        return any(not isinstance(r, CppRunner) for r in self.systems.values())

    def close(self) -> None:
        for system in self.systems.values():
            if isinstance(system, OutsidePeer):
                system.close()


def outside_systems(
    o: OutsideSystems,
    spec: RunnerSpec,
    base: TextLLMRunner,
    trees: dict[str, Any],
    methods: Sequence[str] = (),
) -> Assembled:
    out = Assembled()
    out.systems.update(eager_systems(o, spec, base.meta, trees))
    if o.hf_target is not None:
        from etspec.tools.peers.transformers import transformers_peers

        out.systems.update(transformers_peers(o.hf_target, o.hf_assistant, base))
    out.systems.update(cpp_systems(o, spec, base, trees, methods))
    if o.llama_cpp is not None:
        from etspec.tools.bench_harness import cpu_count
        from etspec.tools.peers.llama_cpp import BASELINES, llama_cpp_peers

        out.systems.update(llama_cpp_peers(o.llama_cpp, base, cpu_count()))
        out.baselines.update(BASELINES)
    return out


def eager_systems(
    o: OutsideSystems, spec: RunnerSpec, meta: TargetMetadata, trees: dict[str, Any]
) -> dict[str, Any]:
    """The eager reference program beside the .pte (``eager`` + each system's name), at
    the .pte's context, prefill chunk and verify widths, so both run the same algorithm."""
    if o.eager_target is None:
        return {}
    eager = replace(
        spec,
        target=o.eager_target,
        draft=o.eager_draft if method_of(spec).draft_program else None,
        reference=True,
        max_seq=meta.max_context,
        prefill_chunk=meta.prefill_chunk,
        verify_widths=tuple(meta.verify_widths),
    )
    base, speculative = load_systems(eager, trees)
    return {"eager target-only": base, **{f"eager {n}": r for n, r in speculative.items()}}


def cpp_systems(
    o: OutsideSystems,
    spec: RunnerSpec,
    base: TextLLMRunner,
    trees: dict[str, Any],
    methods: Sequence[str] = (),
) -> dict[str, Any]:
    """The C++ runner on the same pair: target-only and each tree of --trees it runs (per
    draft method of ``methods``, as ``"cpp <method> <tree>"``)."""
    from etspec.tools.peers.cpp_runner import CppRunner, method_args, tree_args

    if o.cpp_runner is None:
        return {}
    out: dict[str, Any] = {"cpp target-only": CppRunner(o.cpp_runner, spec.target, base)}
    for s in method_specs(spec, methods):
        method = method_args(s)
        if method is None:
            continue
        prefix = f"cpp {s.draft_method} " if methods else "cpp "
        for name, tree in trees.items():
            args = tree_args(tree)
            if args is not None:
                out[prefix + name] = CppRunner(o.cpp_runner, spec.target, base, method, args)
    return out


def run_setting_of(field_name: str) -> RunSetting:
    """The run setting whose ``method.`` field is ``field_name``."""
    return next(r for r in RUN_SETTINGS if r.field == f"method.{field_name}")


def method_specs(spec: RunnerSpec, methods: Sequence[str]) -> list[RunnerSpec]:
    """``spec`` once per draft method of ``methods`` (none: ``spec`` itself), each with the
    draft file and the method options it takes: a bench that runs prompt lookup beside the
    EAGLE-3 draft passes the draft to the latter only."""
    if not methods:
        return [spec]
    out = []
    for name in methods:
        method = draft_method(name)
        keep = {
            k: v
            for k, v in spec.options.items()
            if not (owners := run_setting_of(k).draft_methods) or method.name in owners
        }
        draft = spec.draft if method.draft_program else None
        out.append(replace(spec, draft_method=method.name, draft=draft, options=keep))
    return out


def load_systems(
    spec: RunnerSpec,
    trees: dict[str, TreeSettings | TreePolicy],
    draft_windows: Sequence[int] = (),
    methods: Sequence[str] = (),
) -> tuple[TextLLMRunner, dict[str, TextLLMRunner]]:
    """Target-only runner plus one speculative runner per named tree setting or fixed
    shape, all over one loaded pair; with ``methods`` (draft methods), that per method, as
    ``"<method> <tree>"``; with ``draft_windows``, the first tree again per window W as
    ``"<tree> wW"``, its draft attending to the last W positions only."""
    windowed = run_setting("--draft-window").draft_methods
    if draft_windows and (spec.draft_method not in windowed or spec.draft is None):
        raise EtspecError("draft windows truncate an EAGLE-3 draft's attention; give --draft")
    specs = method_specs(spec, methods)
    with_draft = next((s for s in specs if method_of(s).draft_program and s.draft), specs[0])
    target, draft = load_programs(with_draft)
    base = TextLLMRunner(target)
    systems: dict[str, TextLLMRunner] = {}
    for s in specs:
        if s is not with_draft:
            method_of(s).check(s)
        if not speculates(s):
            continue
        prefix = f"{s.draft_method} " if methods else ""
        mine = draft if method_of(s).draft_program else None
        for name, t in trees.items():
            systems[prefix + name] = speculative_runner(s, base, mine, t)
    if not systems:
        return base, {}
    if draft_windows and trees:
        name, tree = next(iter(trees.items()))
        for w in draft_windows:
            windowed = replace(spec, options={**spec.options, "draft_window": w})
            systems[f"{name} w{w}"] = speculative_runner(windowed, base, draft, tree)
    return base, systems
