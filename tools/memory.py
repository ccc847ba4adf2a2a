"""What loading an artifact costs in resident memory, step by step (``etspec inspect
--memory``)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path
from typing import Any

import click

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


def cpp_max_rss(runner: Path, args: list[str]) -> int:
    """The C++ runner's maximum resident bytes over one run of ``args`` (this process's
    children's maximum: call it from a process that has run no other child)."""
    subprocess.run([str(runner), *args], check=True, capture_output=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux


@click.command()
@click.option(
    "--target", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option("--draft", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--cpp-runner", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--prompt", default="Question: Why does the Moon show phases?\nAnswer:", show_default=True
)
@click.option("--max-new-tokens", default=128, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path))
def main(
    target: Path,
    draft: Path | None,
    cpp_runner: Path | None,
    prompt: str,
    max_new_tokens: int,
    json_out: Path | None,
) -> None:
    """A pair's resident memory: each artifact's file and KV cache, what loading every
    method adds in Python (run in a fresh process: the target first, then the draft), and
    the C++ runner's maximum RSS while it generates (its default draft method and tree)."""
    from etspec.tools.bench_harness import manifest
    from etspec.tools.report import emit_report

    artifacts = {"target": target, **({"draft": draft} if draft else {})}
    settings = {"prompt": prompt, "max_new_tokens": max_new_tokens, "cpp_runner": str(cpp_runner)}
    report: dict[str, Any] = {"manifest": manifest(settings, artifacts), "artifacts": {}}
    for kind, path in artifacts.items():
        steps = loaded_memory(path)
        report["artifacts"][kind] = {
            "file_bytes": path.stat().st_size,
            "kv_cache_bytes": report["manifest"]["artifacts"][kind]["recipe"]["kv_cache_bytes"],
            "python_resident_bytes": sum(steps.values()),
            "python_steps": {k: v for k, v in steps.items() if v},
        }
    if cpp_runner is not None:
        args = [
            "--target",
            str(target),
            "--prompt",
            prompt,
            "--max-new-tokens",
            str(max_new_tokens),
        ]
        report["cpp_max_rss_bytes"] = cpp_max_rss(
            cpp_runner, args + (["--draft", str(draft)] if draft else [])
        )
    emit_report(report, json_out)


if __name__ == "__main__":
    main()
