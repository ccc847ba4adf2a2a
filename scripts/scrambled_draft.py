"""An EAGLE-3 draft that agrees with nothing, for the never-slower benchmark (docs/results.md,
"A draft that never pays"): a copy of a draft checkpoint whose lm_head rows are permuted,
so each draft token it proposes is a fixed wrong one. The dispatcher should stop drafting
with it within a few dozen steps and then run within 2% of target-only's tokens/s.

    python scripts/scrambled_draft.py checkpoints/gemma-3-270m-eagle3 OUT_DIR
    etspec export draft OUT_DIR --target target.pte --target-checkpoint HF_DIR \
        --dtype 8da8w-e4 -o scrambled.pte
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import torch
from safetensors.torch import load_file, save_file


@click.command()
@click.argument("draft", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option("--seed", default=0, show_default=True)
def main(draft: Path, out: Path, seed: int) -> None:
    if out.exists():
        raise click.UsageError(f"{out} exists; give a new folder")
    tensors = load_file(draft / "model.safetensors")
    head = tensors["lm_head.weight"]
    order = torch.randperm(head.shape[0], generator=torch.Generator().manual_seed(seed))
    tensors["lm_head.weight"] = head[order].contiguous()
    out.mkdir(parents=True)
    save_file(tensors, out / "model.safetensors")
    for name in ("config.json", "NOTICE.md", "GEMMA_TERMS.html"):
        if (draft / name).exists():
            shutil.copy(draft / name, out / name)
    click.echo(f"wrote {out} (lm_head rows permuted, seed {seed})")


if __name__ == "__main__":
    main()
