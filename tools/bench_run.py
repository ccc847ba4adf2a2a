"""``etspec bench`` as a library call: which systems run, on which prompts, and what is
written. The command (``etspec/cli/bench.py``) only turns options into a ``BenchRequest``.

Under ``torchrun`` the prompts are sharded by index % world size; rank 0 gathers every rank's
records (gloo) and returns one result, sorted as a single-process run's.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from etspec.contract import TREE_MODES
from etspec.errors import EtspecError
from etspec.files import check_output, write_elsewhere, write_output
from etspec.runtime.runner import TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.settings import parse_shape
from etspec.tools import attribution
from etspec.tools.bench_harness import (
    BASELINE,
    CONTROL,
    BenchFailure,
    manifest,
    merge_shards,
    run_systems,
    shard,
    summarize,
    sweep_trees,
    trace_lines,
)
from etspec.tools.peers.base import OutsidePeer
from etspec.tools.prompts import load_prompts
from etspec.tools.systems import OutsideSystems, load_systems, outside_systems


@dataclass
class BenchRequest:
    """Everything one ``etspec bench`` run needs (the command's options, parsed)."""

    spec: RunnerSpec
    trees: list[str]  # tree modes or shape names; empty: the spec's --tree mode
    # Draft methods run side by side (each over every tree); empty: the spec's method.
    methods: list[str] = field(default_factory=list)
    # The tree options given (TreeSettings field -> value): each mode of ``trees`` takes
    # those it reads (TreeSettings.owned).
    tree_knobs: dict[str, Any] = field(default_factory=dict)
    prompts: str = "humaneval"
    num_prompts: int | None = None
    max_new_tokens: int = 128
    ignore_eos: bool = False
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    sweep: str | None = None
    draft_windows: tuple[int, ...] = ()
    # Target-only timed again as CONTROL (an A/A comparison: the noise on a speedup).
    control: bool = False
    outside: OutsideSystems = field(default_factory=OutsideSystems)
    json_out: Path | None = None
    traces_out: Path | None = None
    force: bool = False
    settings: dict[str, Any] = field(default_factory=dict)  # for the manifest


@dataclass
class BenchOutcome:
    summary: dict[str, dict[str, Any]]
    memory: dict[str, Any]
    peers_in_process: bool
    mismatches: list[tuple[Path, dict[str, Any]]]
    written: Path | None


# Options of the eager reference program only: a .pte's own recipe is in its metadata
# (the manifest's ``artifacts``), and these defaults there read as if they were it.
_REFERENCE_ONLY = ("device", "max_seq", "dtype", "verify_width")
# What parse_shape reads as a shape's name (anything else is an unknown tree).
_SHAPE_NAME = re.compile(r"chain\d+|dynamic-d\d+k\d+t\d+|[nN]\d+|[dD]\d+\s*[xX-]?\s*[bB][fF]\d+")


def tree_settings(req: BenchRequest) -> dict[str, Any]:
    """Each --trees name as tree settings (a mode) or a fixed shape (a shape name)."""
    names = req.trees or [req.spec.tree.mode]
    trees: dict[str, Any] = {}
    width = None
    if any(n not in TREE_MODES for n in names):
        # A shape the target's verify cannot hold is refused before it is built, as
        # `generate` refuses it (N999999999 took 7.8 GB here).
        from etspec.artifact import open_artifact

        width = open_artifact(req.spec.target, "target").metadata.verify_width
    for n in names:
        try:
            if n not in TREE_MODES:
                trees[n] = parse_shape(n, width)
            else:
                trees[n] = TreeSettings.owned(n, req.tree_knobs) if req.trees else req.spec.tree
        except EtspecError as e:
            if _SHAPE_NAME.fullmatch(n):  # a shape's own refusal: too wide, or no tree
                raise EtspecError(f"--trees {n}: {e}") from None
            raise EtspecError(
                f"unknown tree {n!r} in --trees: use a mode ({', '.join(TREE_MODES)}) or a "
                "shape name (chain3, N7, D3xBF2, dynamic-d3k4t16)"
            ) from None
    return trees


def _world() -> tuple[int, int]:
    """(world size, rank) as torchrun sets them; one process when neither is set."""
    raw = {k: os.environ.get(k) for k in ("WORLD_SIZE", "RANK")}
    try:
        world, rank = int(raw["WORLD_SIZE"] or 1), int(raw["RANK"] or 0)
    except ValueError:
        raise EtspecError(
            f"WORLD_SIZE={raw['WORLD_SIZE']!r}, RANK={raw['RANK']!r} are not integers; unset "
            "them or run under torchrun"
        ) from None
    if world < 1 or not 0 <= rank < world:
        raise EtspecError(f"RANK {rank} is outside WORLD_SIZE {world}; unset them or use torchrun")
    if world > 1 and (raw["RANK"] is None or "MASTER_ADDR" not in os.environ):
        raise EtspecError(
            f"WORLD_SIZE={world} without the RANK and MASTER_ADDR torchrun sets: run "
            f"`torchrun --nproc-per-node {world} -m etspec bench ...` or unset WORLD_SIZE"
        )
    return world, rank


def bench(req: BenchRequest) -> BenchOutcome | None:
    """Run every system on the prompts; None on a torchrun rank other than 0."""
    world, rank = _world()
    out, traces_out = req.json_out, req.traces_out
    if traces_out is not None and world > 1:
        traces_out = traces_out.with_name(f"{traces_out.stem}.rank{rank}{traces_out.suffix}")
    spec = req.spec
    # Never over a file this run reads, even with --force (the report over the target .pte
    # it measured exited 0), nor both reports over one file.
    o = req.outside
    inputs = (spec.target, spec.draft, req.prompts, o.eager_target, o.eager_draft,
              o.hf_target, o.hf_assistant, o.cpp_runner, o.llama_cpp)  # fmt: skip
    if (
        out is not None
        and traces_out is not None
        and Path(out).absolute() == Path(traces_out).absolute()
    ):
        raise EtspecError(f"--json and --traces both name {out}; give each its own file")
    for option, path in (("--json", out), ("--traces", traces_out)):
        if path is not None:
            check_output(path, req.force, option, inputs)
    trees = tree_settings(req)
    req.sampling.check()
    load = req.outside.check(spec)
    prompts = load_prompts(req.prompts, req.num_prompts)
    mine = shard(prompts, rank, world) if world > 1 else prompts
    if not mine:
        raise EtspecError(f"{len(prompts)} prompts leave rank {rank} of {world} none; use fewer")
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    if req.sweep is not None:
        from etspec.artifact import open_artifact

        if spec.draft is None:
            raise EtspecError("--sweep sweeps EAGLE-3 dynamic trees: give --draft")

        widest = (
            max(spec.verify_widths)
            if spec.reference
            else open_artifact(spec.target, "target").metadata.verify_width
        )
        for shape in sweep_trees(req.sweep, widest):
            trees.setdefault(shape.name, shape)
    base, speculative = load_systems(spec, trees, req.draft_windows, req.methods)
    systems: dict[str, Any] = {
        BASELINE: base,
        **({CONTROL: base} if req.control else {}),
        **speculative,
    }
    others = outside_systems(req.outside, spec, base, trees, req.methods)
    systems.update(others.systems)
    dump_dir = out.parent if out is not None else Path.cwd()
    mismatches: list[tuple[Path, dict[str, Any]]] = []

    def on_mismatch(dump: dict[str, Any]) -> None:
        mismatches.append((write_dump(dump, dump_dir), dump))

    try:
        with tqdm(total=len(mine), desc="prompts", leave=False, disable=rank != 0) as bar:
            records, first_calls = run_systems(
                systems,
                mine,
                req.max_new_tokens,
                req.sampling,
                bar.update,
                trace=traces_out is not None,
                on_mismatch=on_mismatch,
                baselines=others.baselines,
                ignore_eos=req.ignore_eos,
            )
    except BenchFailure as e:
        path = write_dump(e.dump, dump_dir)
        raise EtspecError(f"{e}; the inputs that reproduce it are in {path}") from None
    finally:
        others.close()
    if traces_out is not None:
        lines = "".join(f"{line}\n" for line in trace_lines(records))
        write_output(traces_out, lines.encode(), "--traces")
        for recs in records.values():
            for r in recs:
                r.pop("steps", None)
    if world > 1:
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, records)
        dist.destroy_process_group()
        if rank != 0:
            return None
        records = merge_shards(parts, prompts)
    for name, recs in records.items():  # which drafter produced each record's steps
        method = _method_of(name, req.methods, spec.draft_method)
        for r in recs:
            r["drafters"] = attribution.drafters(r, method)
    summary = summarize(records, others.baselines)
    for name, system in others.systems.items():
        if isinstance(system, OutsidePeer) and system.threads is not None:
            summary[name]["threads"] = system.threads
        if getattr(system, "build", None):  # which llama.cpp build ran (tools/peers)
            summary[name]["build"] = system.build
    for name, cold in first_calls.items():  # this rank's (rank 0's under torchrun)
        summary[name]["first_call"] = cold
    reports = {name: runner.describe().get("policy_report") for name, runner in speculative.items()}
    for name, system in others.systems.items():  # the C++ runner's, from its last answer
        reports[name] = getattr(system, "policy_report", None)
    for name, report in reports.items():
        if report is not None:  # what --tree auto measured for each candidate (this rank)
            summary[name]["auto_report"] = report
    memory = memory_report(next(iter(speculative.values()), base))
    if out is not None:
        settings = {**req.settings, "world_size": world}
        if not spec.reference:  # the eager reference's own build options, not the .pte's
            for key in _REFERENCE_ONLY:
                settings.pop(key, None)
        artifacts = {} if spec.reference else {"target": Path(spec.target)}
        if spec.draft is not None and not spec.reference:
            artifacts["draft"] = Path(spec.draft)
        # Systems run interleaved, prompt by prompt: the run's load is each system's.
        loads = {"before": load, "after": os.getloadavg()[0]}
        report = {
            "manifest": {**manifest(settings, artifacts), "load_average": loads},
            "summary": summary,
            "memory": memory,
            "records": records,
        }
        data = json.dumps(report, indent=1).encode()
        try:
            write_output(out, data, "--json")
        except EtspecError as e:
            try:
                kept = write_elsewhere(data, "bench")
            except OSError:
                raise e from None
            raise EtspecError(f"{e}; the report is in {kept}") from None
    return BenchOutcome(summary, memory, others.in_process, mismatches, out)


def _method_of(system: str, methods: list[str], default: str) -> str:
    """The draft method a system ran: its name's first word under --draft-methods (C++
    peers prefixed ``cpp``), else the run's."""
    first = system.removeprefix("cpp ").split(" ", 1)[0]
    return first if first in methods else default


def memory_report(runner: TextLLMRunner) -> dict[str, Any]:
    """The pair's stored sizes and the process's peak; `etspec inspect --memory` shows what
    loading them costs."""
    memory: dict[str, Any] = dict(runner.memory())
    stored = sum(v for k, v in memory.items() if k.endswith(("weights_bytes", "kv_bytes")))
    memory["peak_rss_vs_weights_and_kv"] = memory["peak_rss_bytes"] / stored
    return memory


def write_dump(dump: dict[str, Any], folder: Path) -> Path:
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
        "| e2e speedup | ceiling | of ceiling | identical | steps by drafter |",
        "|" + "---|" * 11,
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
        if s.get("near_ties"):  # differing only where the target's top two nearly tie
            same += f" (+{s['near_ties']} near-tie)"
        if s.get("identical_to", "target-only") != "target-only":
            same += f" (vs {s['identical_to']})"
        rows.append(
            f"| {name} | {tps['mean']:.1f} | {tps['p50']:.1f} | {s['ttft_ms']['p50']:.0f} "
            f"| {tpc} | {sp} | {e2e} "
            f"| {ceiling} | {achieved} | {same} | {attribution.shares(s)} |"
        )
    return "\n".join(rows)
