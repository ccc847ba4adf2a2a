"""Training speed of an EAGLE-3 draft at Gemma 3 270M's shapes, by draft vocabulary size.

    python scripts/bench_draft_training.py [--draft-vocab 8192 --draft-vocab 16384]
        [--ttt-steps 3] [--batch 4] [--threads 2] [--steps 5] [--json OUT.json]

One optimizer step of ``train_draft.py``'s objective (training-time test unrolled
``--ttt-steps`` times, the sparse top-k loss, AdamW) on random weights and inputs of the
shapes ``scripts/train_gemma_draft.sh`` trains (hidden 640, 4 heads of 160, one KV head,
MLP 2,048, windows of 256 tokens, the target's 262,144-token embedding frozen), after two
warm-up steps. The draft's lm_head has one row per draft-vocabulary token and is most of
the step's arithmetic, so the vocabulary size sets how many tokens an hour trains. Prints
and writes milliseconds per step and training tokens per second per size.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import click
import torch

from etspec.models.eagle3 import Eagle3Config, Eagle3Draft
from etspec.training.state import autocast, bf16_matmuls, precision_option, use_bf16
from etspec.training.train_draft import TOP_K, TTTObjective

GEMMA3_270M = {"hidden": 640, "intermediate": 2048, "heads": 4, "head_dim": 160, "vocab": 262144}
WINDOW = 256


def _objective(draft_vocab: int, ttt_steps: int) -> TTTObjective:
    g = GEMMA3_270M
    cfg = Eagle3Config.from_hf({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": g["hidden"], "intermediate_size": g["intermediate"],
        "num_attention_heads": g["heads"], "num_key_value_heads": 1, "head_dim": g["head_dim"],
        "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "max_position_embeddings": 32768, "vocab_size": g["vocab"],
        "draft_vocab_size": draft_vocab, "target_hidden_size": g["hidden"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 8, 15]},
        "torch_dtype": "float32",
    })  # fmt: skip
    torch.manual_seed(0)
    draft = Eagle3Draft(cfg, max_context=WINDOW + ttt_steps, scratch=0)
    with torch.no_grad():
        for p in draft.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
    draft.embed_tokens.weight.requires_grad_(False)
    used = torch.randperm(g["vocab"])[:draft_vocab].sort().values
    return TTTObjective(draft, used, ttt_steps)


def _time_steps(draft_vocab: int, ttt_steps: int, batch: int, steps: int, bf16: bool) -> float:
    """Seconds per optimizer step, after two warm-up steps."""
    objective = _objective(draft_vocab, ttt_steps)
    params = [p for p in objective.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    shape = (batch, WINDOW)
    inputs = (
        torch.randint(0, GEMMA3_270M["vocab"], shape, generator=g),
        torch.randn(*shape, 3 * GEMMA3_270M["hidden"], generator=g),
        torch.randint(0, draft_vocab + 1, (*shape, TOP_K), generator=g),
        torch.softmax(torch.randn(*shape, TOP_K, generator=g), -1),
        torch.randint(0, GEMMA3_270M["vocab"], shape, generator=g),
        torch.ones(shape, dtype=torch.bool),
    )

    def step() -> None:
        with autocast("cpu", bf16):
            loss, _ = objective(*inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


@click.command()
@click.option("--draft-vocab", "sizes", multiple=True, type=int, default=(8192, 16384),
              show_default=True)  # fmt: skip
@click.option("--ttt-steps", default=3, show_default=True)
@click.option("--batch", default=4, show_default=True, help="Windows of 256 tokens per step.")
@click.option("--threads", default=None, type=int, help="torch threads [default: torch's].")
@click.option("--steps", default=5, show_default=True, help="Timed steps per size.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
@precision_option
def main(
    sizes: tuple[int, ...],
    ttt_steps: int,
    batch: int,
    threads: int | None,
    steps: int,
    json_out: Path | None,
    precision: str,
) -> None:
    """Time a draft training step per draft vocabulary size."""
    if threads:
        torch.set_num_threads(threads)
    bf16 = use_bf16(precision, "cpu")
    rows = []
    for size in sizes:
        s = _time_steps(size, ttt_steps, batch, steps, bf16)
        row = {"draft_vocab": size, "ms_per_step": round(s * 1000, 1),
               "train_tokens_per_s": round(batch * WINDOW / s, 1)}  # fmt: skip
        rows.append(row)
        click.echo(json.dumps(row))
    report = {
        "settings": {
            "ttt_steps": ttt_steps,
            "batch": batch,
            "window": WINDOW,
            "steps": steps,
            "threads": torch.get_num_threads(),
            "bf16": bf16,
        },
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "bf16_matrix_units": bf16_matmuls("cpu"),
            "torch": torch.__version__,
        },
        "rows": rows,
    }
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
