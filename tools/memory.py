"""What loading an artifact costs in resident memory, step by step (``etspec inspect
--memory``)."""

from __future__ import annotations

from pathlib import Path

from etspec import logs
from etspec.artifact import Snapshot, executorch_runtime
from etspec.runtime.stats import current_rss_bytes
from etspec.runtime.xnnpack import default_weight_cache, set_weight_cache


def loaded_memory(path: str | Path, weight_cache: bool | None = None) -> dict[str, int]:
    """Resident bytes each step of loading ``path`` adds: the program, then every method in
    turn (without XNNPACK's weight cache each method packs its own copy of the weights, so
    this is what the method set costs). Loads a fresh copy of the program the way the
    runtime does (``artifact.Snapshot``: the file's bytes read once and checked, so the
    program step includes the pages ExecuTorch maps of them; what it unmaps is released once
    every method is loaded, so the total is what stays resident); run it in a process of its
    own for numbers that are not shared with programs loaded before."""
    out: dict[str, int] = {}
    with logs.quiet(native=True):
        runtime = executorch_runtime()
        set_weight_cache(default_weight_cache() if weight_cache is None else weight_cache)
        before = current_rss_bytes()
        snapshot = Snapshot.take(path)
        program = runtime.load_program(snapshot.source())
        snapshot.loaded()
        out["program"] = current_rss_bytes() - before
        methods = []
        for name in sorted(program.method_names):
            before = current_rss_bytes()
            methods.append(program.load_method(name))  # kept alive: released ones free memory
            out[name] = current_rss_bytes() - before
        snapshot.release_unmapped()
        snapshot.close()
    return out
