"""Held-out top-1 agreement of an EAGLE-3 draft with its target, per drafting step, with the
draft in fp32 and under weight recipes (eager torch, the recipe's own quantizer): what a
recipe costs the draft before anything is exported or timed.

    python scripts/draft_agreement.py --target HF_DIR --features DATA --draft DRAFT_DIR \
        --dtype fp32 --dtype 8da8w-e4 --json out.json

The windows are ``draft_data.py features``' held-out ones (those training never reads), the
agreement is the trainer's (``train_draft.evaluate_store``): the draft's top-1 at unroll step
k against the target's top-1, fed the data's own tokens. ``--no-keep`` quantizes every
linear, ``fc`` included (what the recipes did before ``Eagle3Draft.FULL_PRECISION``).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import click
import numpy as np
import torch

from etspec.models.eagle3 import Eagle3Draft
from etspec.models.families import load_target
from etspec.models.quantize import quantize
from etspec.training.train_draft import FeatureStore, TTTObjective, evaluate_store


@click.command()
@click.option("--target", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--features", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--draft", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--dtype", "dtypes", multiple=True, default=("fp32", "8da8w-e4"), show_default=True)
@click.option("--keep/--no-keep", default=True, help="Leave Eagle3Draft.FULL_PRECISION fp32.")
@click.option("--windows", default=0, help="At most this many held-out windows (0: all).")
@click.option("--ttt-steps", default=3, show_default=True)
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
def main(
    target: Path,
    features: Path,
    draft: Path,
    dtypes: tuple[str, ...],
    keep: bool,
    windows: int,
    ttt_steps: int,
    json_out: Path | None,
) -> None:
    store = FeatureStore(features)
    if windows and windows < len(store.held):
        pick = np.random.default_rng(0).choice(store.held, windows, replace=False)
        store.held = np.sort(pick)
    seq = store.windows.shape[1] + ttt_steps
    embedding = load_target(target, max_context=seq, scratch=0).embed_tokens.weight.detach()
    base = Eagle3Draft.from_checkpoint(draft, seq, 0, embedding.clone()).eval()
    used = torch.arange(len(base.d2t)) + base.d2t
    t2d = torch.full((embedding.shape[0],), -1, dtype=torch.long)
    t2d[used] = torch.arange(len(used))
    rows = {}
    for dtype in dtypes:
        model = copy.deepcopy(base)
        quantize(model, dtype, keep=Eagle3Draft.FULL_PRECISION if keep else ())
        held = evaluate_store(TTTObjective(model, used, ttt_steps), store, t2d, "cpu", False)
        rows[dtype] = {name: {"loss": v[0], "top1_per_step": v[1]} for name, v in held.items()}
        click.echo(f"{dtype}: {rows[dtype]}")
    if json_out is not None:
        report = {
            "command": " ".join(["python scripts/draft_agreement.py", *sys.argv[1:]]),
            "draft": str(draft),
            "features": str(features),
            "held_out_windows": len(store.held),
            "keep_fp32": list(Eagle3Draft.FULL_PRECISION) if keep else [],
            "dtypes": rows,
        }
        json_out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
