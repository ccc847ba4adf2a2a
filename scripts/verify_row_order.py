"""Where a target's verify rows stop matching its decodes, by KV layout (a measurement).

For each committed length, decode ``--rows`` tokens one at a time (the reference), then
verify the same tokens as one chain with its rows in their own committed slots
(position-overwrite) and in the scratch slots (scratch-commit), and record each row's
largest logit difference from the decode of the same token. On an int8-activation recipe
the scratch rows, which attend in another column order, match bit for bit until a
last-bit difference crosses an int8 step; the in-place rows always match
(docs/models.md "Exactness of quantized Gemma"). The runtime refuses scratch-commit on such
targets, so this drives the KV manager with that check lifted.

    python scripts/verify_row_order.py TARGET.pte --json OUT.json
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from etspec.contract import KV_STRATEGIES, TARGET_DECODE, TARGET_RESET
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import PteProgram
from etspec.runtime.speculative import kv_cache
from etspec.runtime.speculative.tree import DraftTree


def _decode(prog: PteProgram, layout: MaskLayout, token: int, position: int) -> torch.Tensor:
    pos, mask = layout.decode_row(position)
    band = layout.band(position, mask.shape[-1])
    return prog.run(TARGET_DECODE, torch.tensor([token]), pos, mask, *band)[0][0]


@click.command()
@click.argument("target", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--committed", default="4,12,20,28,33,50,60", show_default=True)
@click.option("--rows", default=16, show_default=True)
@click.option("--json", "out", type=click.Path(path_type=Path), required=True)
def main(target: Path, committed: str, rows: int, out: Path) -> None:
    kv_cache.check_kv_strategy = lambda meta, strategy: None  # measure what is refused
    prog = PteProgram.load(target, expect="target")
    layout = MaskLayout.of(prog.metadata)
    rows = min(rows, prog.metadata.verify_width)
    tokens = list(range(2000, 2000 + rows))
    records = []
    for n in (int(c) for c in committed.split(",")):

        def fresh(n: int = n) -> None:
            prog.run(TARGET_RESET)
            for i in range(n):
                _decode(prog, layout, 1000 + i, i)

        fresh()
        ref = [_decode(prog, layout, t, n + i) for i, t in enumerate(tokens)]
        for strategy in KV_STRATEGIES:
            fresh()
            manager = kv_cache.SpecKVCacheManager(prog, strategy, n)
            method, inputs = manager.verify_inputs(DraftTree.chain(tokens[0], tokens[1:]))
            logits = prog.run(method, *inputs)[0]
            diffs = [float((logits[i] - ref[i]).abs().max()) for i in range(rows)]
            inexact = [i for i, d in enumerate(diffs) if d > 0.0]
            off = [i for i, d in enumerate(diffs) if d > 0.01]  # a step, not a last bit
            records.append({"committed": n, "kv": strategy, "method": method,
                            "max_abs_logit_diff": diffs,
                            "first_inexact_row": inexact[0] if inexact else None,
                            "first_row_off_by_0.01": off[0] if off else None})  # fmt: skip
            click.echo(f"committed {n:3d} {strategy:18s} largest difference {max(diffs):.3g}, "
                       f"first row off by > 0.01: {off[0] if off else None}")  # fmt: skip
    meta = prog.metadata
    out.write_text(json.dumps({"target": str(target), "dtype": meta.dtype,
                               "max_context": meta.max_context, "rows": rows,
                               "records": records}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
