"""Load the programs a ``RunnerSpec`` names: ``.pte`` files (performance mode) or checkpoint
folders run in torch (reference mode). ``runtime/runner.py`` makes runners over them."""

from __future__ import annotations

from etspec.contract import RUN_SETTINGS, message
from etspec.errors import EtspecError
from etspec.runtime.program import Program, PteProgram, load_pair
from etspec.runtime.spec import RunnerSpec
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.registry import draft_method


def method_of(spec: RunnerSpec) -> DraftMethod:
    """The draft method ``spec`` names (``speculative/registry.py``)."""
    return draft_method(spec.draft_method)


def speculates(spec: RunnerSpec) -> bool:
    """Whether ``spec`` asks for speculation at all (EAGLE-3 without a draft: no)."""
    return method_of(spec).speculates(spec)


def check_draftless(spec: RunnerSpec) -> None:
    """A method with a draft program of its own decodes target-only without one (the
    default, combined, does): refuse an option another owner would read without a draft
    (``--max-ngram``: prompt lookup's), which would otherwise be ignored without a word."""
    if spec.draft is not None or not method_of(spec).draft_program:
        return
    for setting in RUN_SETTINGS:
        if setting.group != "method" or spec.options.get(setting.name) is None:
            continue
        for owner in setting.draft_methods:
            if not draft_method(owner).draft_program:
                raise EtspecError(message("option_needs_method", option=setting.flag, owner=owner))


def load_programs(spec: RunnerSpec) -> tuple[Program, Program | None]:
    """The target program and, for a method with a draft program of its own (EAGLE-3), the
    draft program of ``spec``, after the method refused what it cannot honour."""
    check_draftless(spec)
    method = method_of(spec)
    method.check(spec)
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
            **(method.eager_target_options(spec) if speculates(spec) else {}),
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
