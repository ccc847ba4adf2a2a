"""The sampled acceptance an EAGLE-3 draft checkpoint should reach against its target,
computed offline (eager target and draft, nothing exported): over the texts an `etspec
bench --json` run generated, the probability that the draft's first token is accepted,
``sum_x min(p(x), q(x))``, with p the target's and q the draft's next-token distribution,
each processed by the run's sampler (temperature, top-k, top-p) as the runtime processes
them (``Sampler.dist``).

    python scripts/draft_sampled_acceptance.py --target HF_DIR --draft DRAFT_DIR \
        --run RUN.json [--traces RUN.jsonl] [--system chain5] [--scale 0.8 --scale 1.2] \
        [--json OUT.json]

Over every generated position, and, given the run's ``--traces``, over the positions where
a step began: what the run's depth-1 acceptance estimates, printed beside it (the
positions after a rejected token are harder than the average one). ``--scale`` also
scores the draft's q at the run's temperature times each scale: whether a draft would be
accepted more often sampled hotter or colder than the target (the verifier stays exact
either way, since it compares the q the token was drawn from).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from etspec.models.build import target_embedding
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.families import load_target
from etspec.models.training import draft_ttt_forward, target_forward
from etspec.runtime.prompt import prompt_ids
from etspec.runtime.sampling import Sampler, SamplingConfig, TokenDist
from etspec.runtime.tokenizer import Tokenizer
from etspec.tools.prompts import load_prompts


def overlap(p: TokenDist, q: TokenDist) -> float:
    """``sum_x min(p(x), q(x))``: the probability that a token drawn from q is accepted
    against p (speculative sampling's acceptance of one drafted token)."""
    return float(np.minimum(q.probs, p.at(q.ids)).sum())


def coupling(p: TokenDist, q: TokenDist) -> float:
    """The probability that races of p and q with shared clocks pick the same token
    (coupled sampling, ``TokenDist.race``): ``sum_x 1 / sum_y max(p(y)/p(x), q(y)/q(x))``
    over the tokens both give mass (Daliri et al. 2024), at least ``(1 - tv) / (1 + tv)``
    of the overlap's ``1 - tv``."""
    ids = np.union1d(p.ids, q.ids)
    pu, qu = p.at(ids), q.at(ids)
    both = (pu > 0) & (qu > 0)
    px, qx = pu[both], qu[both]
    # [x, y] ratios, in blocks: a row's support is at most a few thousand tokens.
    total = 0.0
    for lo in range(0, len(px), 256):
        m = np.maximum(pu[None, :] / px[lo : lo + 256, None], qu[None, :] / qx[lo : lo + 256, None])
        total += float((1.0 / m.sum(1)).sum())
    return total


def step_starts(accepted: Sequence[int], generated: int) -> list[int]:
    """Indices into the generated tokens that a step's first drafted token predicted: the
    prefill emits token 0, and a step that accepts a tokens emits a + 1."""
    starts, g = [], 1
    for a in accepted:
        if g >= generated:
            break
        starts.append(g)
        g += a + 1
    return starts


@torch.no_grad()
def score(
    target_dir: Path,
    draft_dir: Path,
    run: dict[str, Any],
    system: str,
    scales: Sequence[float],
    traces: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    """Mean acceptance of the draft's first token over the run's generated positions, per
    scale of the draft's temperature (1.0 always among them); with ``traces`` (prompt id ->
    accepted per step), also at the steps' first positions and as the run observed it."""
    settings = run["manifest"]["settings"]
    if not settings.get("temperature"):
        raise click.UsageError("the run is greedy: score a sampled run (--temperature)")
    config = {k: settings[k] for k in ("top_k", "top_p") if settings.get(k) is not None}
    temperature = float(settings["temperature"])
    scales = sorted({1.0, *scales})
    unit = scales.index(1.0)
    target_sampler = Sampler(SamplingConfig(temperature=temperature, **config))
    draft_samplers = [
        Sampler(SamplingConfig(temperature=temperature * s, **config)) for s in scales
    ]
    records = run["records"][system]
    tokenizer_file = target_dir / "tokenizer.json"
    tokenizer = Tokenizer(tokenizer_file.read_bytes()) if tokenizer_file.exists() else None
    prompts = {p.id: p for p in load_prompts(settings["prompts"])}
    context = max(r["prompt_tokens"] + len(r["token_ids"]) for r in records) + 1
    target = load_target(target_dir, context, 8).eval()
    rows = []
    for r in records:
        ids = prompt_ids(prompts[r["prompt_id"]].text, tokenizer, target.cfg.vocab_size)
        if len(ids) != r["prompt_tokens"]:
            raise click.UsageError(
                f"{r['prompt_id']}: {len(ids)} prompt tokens here, {r['prompt_tokens']} in the "
                "run: score with the target folder the run's artifact was exported from"
            )
        rows.append((ids, r))
    draft = Eagle3Draft.from_checkpoint(draft_dir, context, 8, target_embedding(target_dir))
    draft.eval()
    target_ids = (torch.arange(draft.cfg.draft_vocab_size) + draft.d2t).numpy()
    every: list[list[float]] = [[] for _ in scales]
    coupled: list[float] = []
    at_starts: list[float] = []
    observed: list[bool] = []
    by_set: dict[str, list[float]] = {}  # at x1, per prompt set ("translate/0": translate)
    for ids, record in rows:
        generated = record["token_ids"]
        if len(generated) < 2:
            continue
        n0 = len(ids)
        seq = torch.tensor([ids + generated])
        logits, hidden = target_forward(target, seq)
        # Row j of the first unroll step drafts the token at j + 2 from token j + 1 and the
        # target's state at j: generated token g (position n0 + g) is drafted at row n0+g-2.
        drafted = draft_ttt_forward(draft, seq, hidden, 1)[0][0]
        per_scale: list[list[float]] = [[] for _ in scales]
        for g in range(1, len(generated)):
            p = target_sampler.dist(logits[0, n0 + g - 1])
            for s, sampler in enumerate(draft_samplers):
                q = sampler.dist(drafted[n0 + g - 2]).mapped(target_ids)
                per_scale[s].append(overlap(p, q))
                if s == unit:
                    coupled.append(coupling(p, q))
        for s, values in enumerate(per_scale):
            every[s] += values
        by_set.setdefault(prompt_set(record["prompt_id"]), []).extend(per_scale[unit])
        if traces is not None and record["prompt_id"] in traces:
            accepted = traces[record["prompt_id"]]
            at_starts += [per_scale[unit][g - 1] for g in step_starts(accepted, len(generated))]
            observed += [a >= 1 for a in accepted]
    out: dict[str, Any] = {
        "run_revision": run["manifest"].get("git_revision"),
        "prompts": settings["prompts"],
        "system": system,
        "temperature": temperature,
        **config,
        "positions": len(every[0]),
        "every_position": {f"{s:g}": float(np.mean(v)) for s, v in zip(scales, every, strict=True)},
        "by_set": {k: float(np.mean(v)) for k, v in by_set.items()} if len(by_set) > 1 else {},
        # The same first tokens under coupled sampling (a seeded request): races agree.
        "coupled": float(np.mean(coupled)) if coupled else None,
    }
    if traces is not None:
        out["step_starts"] = {
            "steps": len(observed),
            "expected": float(np.mean(at_starts)) if at_starts else None,
            "observed": float(np.mean(observed)) if observed else None,
        }
    return out


def prompt_set(prompt_id: str) -> str:
    """The built-in set a prompt id names (``tasks``' ids are "set/index")."""
    return prompt_id.split("/", 1)[0]


def read_traces(path: Path, system: str) -> dict[str, list[int]]:
    """Prompt id -> tokens accepted per step, from an `etspec bench --traces` file."""
    out = {}
    for line in path.read_text().splitlines():
        trace = json.loads(line)
        if trace["system"] == system:
            out[trace["prompt_id"]] = [step["accepted"] for step in trace["steps"]]
    return out


@click.command()
@click.option("--target", "target_dir", required=True, type=click.Path(path_type=Path))
@click.option("--draft", "draft_dir", required=True, type=click.Path(path_type=Path))
@click.option("--run", "run_file", required=True, type=click.Path(path_type=Path))
@click.option("--traces", "traces_file", type=click.Path(path_type=Path))
@click.option("--system", default="chain5", show_default=True)
@click.option("--scale", "scales", type=float, multiple=True, help="Draft temperature scales.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path))
def main(
    target_dir: Path,
    draft_dir: Path,
    run_file: Path,
    traces_file: Path | None,
    system: str,
    scales: tuple[float, ...],
    json_out: Path | None,
) -> None:
    run = json.loads(run_file.read_text())
    traces = read_traces(traces_file, system) if traces_file is not None else None
    if traces is not None and not traces:
        raise click.UsageError(f"{traces_file} holds no traces of {system} (--system)")
    result = score(target_dir, draft_dir, run, system, scales, traces)
    for scale, value in result["every_position"].items():
        click.echo(f"draft temperature x{scale}: {value:.4f} over {result['positions']} positions")
    for name, value in result["by_set"].items():
        click.echo(f"  {name}: {value:.4f}")
    if result["coupled"] is not None:
        click.echo(f"coupled (raced) at x1: {result['coupled']:.4f}")
    if "step_starts" in result:
        s = result["step_starts"]
        click.echo(
            f"steps' first tokens ({s['steps']} steps): expected {s['expected']:.4f}, "
            f"observed {s['observed']:.4f}"
        )
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
