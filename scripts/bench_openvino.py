"""OpenVINO against XNNPACK on the same checkpoints: cost per call, tokens/s, memory.

    python scripts/bench_openvino.py \\
        --system xnnpack=.etspec-cache/target.pte,.etspec-cache/draft.pte \\
        --system openvino=.etspec-cache/openvino/target.pte,.etspec-cache/openvino/draft.pte \\
        --system gemma-xnnpack=GEMMA_FP32.pte --system gemma-openvino=GEMMA_OV.pte \\
        [--context 64,512] [--repeats 100] [--prompts humaneval] [--num-prompts 20]
        [--max-new-tokens 128] [--tree auto] [--temperature 0.7] [--seed 0]
        [--json OUT.json]

Each ``--system`` is a label and a target ``.pte`` with, optionally, its draft; a system
without a draft speculates with prompt lookup. Per system, each measurement runs in its own
process (an OpenVINO process caps oneDNN's ISA for fp32, etspec/openvino.py; nothing is
shared between systems):

- **cost per call**: ``scripts/cost_curve.py`` on the target: decode and every compiled
  verify width at each ``--context`` (ms per call and ``t_verify(K) / t_decode``);
- **tokens/s greedy and sampled**: ``etspec bench`` (target-only and speculative, the same
  prompts, one run each), greedy then at ``--temperature`` with ``--seed``;
- **memory**: ``etspec inspect --memory --json`` of the target and the draft (resident
  memory after loading every method, against the file and KV sizes).

Timings are only comparable from one run on an idle machine; the JSON records the core
count and the load average before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).resolve().parent
ETSPEC = [sys.executable, "-m", "etspec"]


def _run(args: list[str]) -> None:
    res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        raise click.ClickException(f"{' '.join(args)} failed:\n{res.stderr[-2000:]}")


def _json_of(args: list[str], out: Path) -> dict[str, Any]:
    """Run a command that writes JSON to ``out`` and read it."""
    _run(args)
    return json.loads(out.read_text())


def _system(text: str) -> tuple[str, Path, Path | None]:
    label, _, files = text.partition("=")
    paths = [Path(p) for p in files.split(",") if p]
    if not label or not 1 <= len(paths) <= 2 or not all(p.is_file() for p in paths):
        raise click.BadParameter(f"expected LABEL=TARGET.pte[,DRAFT.pte] of existing files: {text}")
    return label, paths[0], paths[1] if len(paths) == 2 else None


def measure(target: Path, draft: Path | None, opts: dict[str, Any], work: Path) -> dict[str, Any]:
    """Cost curve, greedy and sampled bench, and memory of one system."""
    curve = work / "curve.json"
    cost = _json_of(
        [sys.executable, str(HERE / "cost_curve.py"), "--pte", str(target),
         "--context", opts["context"], "--repeats", str(opts["repeats"]), "--json", str(curve)],
        curve,
    )  # fmt: skip
    pair = ["--target", str(target)]
    pair += ["--draft", str(draft)] if draft else ["--draft-method", "prompt-lookup"]
    common = [
        "--prompts", opts["prompts"], "--num-prompts", str(opts["num_prompts"]),
        "--max-new-tokens", str(opts["max_new_tokens"]), "--tree", opts["tree"], "--force",
    ]  # fmt: skip
    runs = {}
    for name, sampling in (
        ("greedy", []),
        ("sampled", ["--temperature", str(opts["temperature"]), "--seed", str(opts["seed"])]),
    ):
        out = work / f"{name}.json"
        report = _json_of([*ETSPEC, "bench", *pair, *common, *sampling, "--json", str(out)], out)
        runs[name] = {"summary": report["summary"], "memory": report["memory"]}
    memory = {}
    for role, path in (("target", target), ("draft", draft)):
        if path is not None:
            args = [*ETSPEC, "inspect", "--memory", "--json", str(path)]
            res = subprocess.run(args, capture_output=True, text=True)
            if res.returncode != 0:
                raise click.ClickException(f"inspect --memory {path} failed:\n{res.stderr}")
            memory[role] = json.loads(res.stdout)["memory"]
    return {
        "target": str(target),
        "draft": str(draft) if draft else None,
        "cost_curve": cost["results"][0],
        **runs,
        "inspect_memory": memory,
    }


@click.command()
@click.option("--system", "systems", multiple=True, required=True, help="LABEL=TARGET[,DRAFT]")
@click.option("--context", default="64,512", show_default=True, help="Cost-curve contexts.")
@click.option("--repeats", default=100, show_default=True, help="Cost-curve rounds.")
@click.option("--prompts", default="humaneval", show_default=True, help="`etspec bench` set.")
@click.option("--num-prompts", default=20, show_default=True)
@click.option("--max-new-tokens", default=128, show_default=True)
@click.option("--tree", default="auto", show_default=True, help="Speculative tree mode.")
@click.option("--temperature", default=0.7, show_default=True, help="The sampled runs'.")
@click.option("--seed", default=0, show_default=True, help="The sampled runs' seed.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write results.")
def main(systems: tuple[str, ...], json_out: str | None, **opts: Any) -> None:
    parsed = [_system(s) for s in systems]
    doc: dict[str, Any] = {
        "cores": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "settings": opts,
        "systems": {},
    }
    for label, target, draft in parsed:
        click.echo(f"{label}: {target}" + (f" + {draft}" if draft else " (prompt lookup)"))
        with tempfile.TemporaryDirectory() as work:
            result = measure(target, draft, opts, Path(work))
        doc["systems"][label] = result
        for c, row in result["cost_curve"]["contexts"].items():
            ratios = " ".join(f"K={k} {v:.2f}x" for k, v in row["verify_over_decode"].items())
            click.echo(f"  L={c}: decode {row['decode_ms']:.2f} ms; {ratios}")
        for run in ("greedy", "sampled"):
            line = ", ".join(
                f"{name} {s['tokens_per_s']['mean']:.1f} tok/s"
                for name, s in result[run]["summary"].items()
            )
            click.echo(f"  {run}: {line}")
        loaded = {k: v["loaded_bytes"] / 1e6 for k, v in result["inspect_memory"].items()}
        click.echo("  resident: " + ", ".join(f"{k} {v:.0f} MB" for k, v in loaded.items()))
    doc["load_average_after"] = os.getloadavg()
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
