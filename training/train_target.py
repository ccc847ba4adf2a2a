"""Train the bundled target: a small Llama-architecture code LM on the local stdlib sources.

Writes a normal Hugging Face checkpoint folder (``config.json``, ``model.safetensors``,
``tokenizer.json``) that etspec exports and ``transformers`` loads. The model is the very
``LlamaTarget`` that exports (trained through ``etspec.models.training``), so there is no
conversion step. Deep and thin by default: on a phone-class CPU, decode cost is dominated by
per-layer work, and MobileLLM found depth to pay at this size.

    python scripts/train_target.py --out OUT [--steps N] [--resume]

Progress is a tqdm bar; ``OUT/train_state.pt`` is written every ``--save-every`` steps and
``--resume`` continues from it (same data order, same result as an uninterrupted run).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import click
import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm import tqdm

from etspec.models.llama import LlamaTarget
from etspec.models.llama_config import DecoderConfig
from etspec.models.training import target_forward
from etspec.training.corpus import (
    EOT,
    encode,
    read_texts,
    stdlib_root,
    train_tokenizer,
    write_tokenizer_files,
)
from etspec.training.state import autocast, load_state, save_state


def hf_config(a: dict, vocab: int, eot: int) -> dict:  # type: ignore[type-arg]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": a["hidden"],
        "intermediate_size": a["intermediate"],
        "num_hidden_layers": a["layers"],
        "num_attention_heads": a["heads"],
        "num_key_value_heads": a["kv_heads"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": a["seq_len"],
        "tie_word_embeddings": True,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "torch_dtype": "float32",
    }


def batches(stream: np.ndarray, seq_len: int, batch: int, seed: int, step: int) -> torch.Tensor:
    """The batch of step ``step``: random windows, a pure function of (seed, step)."""
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(stream) - seq_len, size=batch)
    return torch.from_numpy(np.stack([stream[s : s + seq_len] for s in starts]).astype(np.int64))


@torch.no_grad()
def held_out_loss(model: LlamaTarget, stream: np.ndarray, seq_len: int, device: str) -> float:
    """Mean next-token loss over consecutive held-out windows (at most 64)."""
    n = min(64, len(stream) // seq_len)
    windows = torch.from_numpy(stream[: n * seq_len].astype(np.int64)).view(n, seq_len)
    total = 0.0
    for chunk in windows.split(8):
        chunk = chunk.to(device)
        logits, _ = target_forward(model, chunk)
        total += F.cross_entropy(
            logits[:, :-1].flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum"
        ).item()
    return total / (n * (seq_len - 1))


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def save_checkpoint(model: LlamaTarget, config: dict, tok, out: Path, dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def, type-arg]
    state = {
        f"model.{k}": v.detach().to("cpu", dtype).contiguous()
        for k, v in model.state_dict().items()
        if k != "lm_head.weight"  # tied to the embedding
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    write_tokenizer_files(tok, out, config["max_position_embeddings"])


@click.command()
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Checkpoint folder.")
@click.option(
    "--data-root",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder of .py sources [default: this Python's stdlib].",
)
@click.option("--vocab", default=4096, show_default=True)
@click.option("--hidden", default=256, show_default=True)
@click.option("--layers", default=16, show_default=True)
@click.option("--heads", default=4, show_default=True)
@click.option("--kv-heads", default=2, show_default=True)
@click.option("--intermediate", default=768, show_default=True)
@click.option("--seq-len", default=512, show_default=True)
@click.option("--batch", default=4, show_default=True)
@click.option("--steps", default=1200, show_default=True)
@click.option("--lr", default=2e-3, show_default=True)
@click.option("--warmup", default=50, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--save-every", default=100, show_default=True)
@click.option("--resume/--no-resume", default=False, help="Continue from OUT/train_state.pt.")
@click.option(
    "--save-dtype",
    type=click.Choice(["bfloat16", "float32"]),
    default="bfloat16",
    show_default=True,
    help="Weights dtype on disk (the held-out loss is of these).",
)
@click.option("--device", default=None, help="cpu or cuda [default: cuda when present].")
def main(
    out: Path,
    data_root: Path | None,
    seed: int,
    steps: int,
    resume: bool,
    device: str | None,
    save_every: int,
    save_dtype: str,
    **a,
) -> None:  # type: ignore[no-untyped-def]
    """Train the target LM and write an HF checkpoint folder to OUT."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    root = data_root or stdlib_root()
    t0 = time.time()
    train_texts, held_texts = read_texts(root)
    tok_file = out / "tokenizer.json"
    if resume and tok_file.is_file():  # ids must not change under a resumed model
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tok_file))
    else:
        tok = train_tokenizer(train_texts, a["vocab"])
        tok_file.parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(tok_file))
    eot = tok.token_to_id(EOT)
    train, held = encode(tok, train_texts, eot), encode(tok, held_texts, eot)
    click.echo(
        f"corpus {root}: {len(train_texts)} train files ({len(train):,} tokens), "
        f"{len(held_texts)} held-out ({len(held):,} tokens); tokenizer {time.time() - t0:.0f}s"
    )
    if len(held) <= a["seq_len"] or len(train) <= a["seq_len"]:
        raise click.UsageError(
            f"{root} holds too little source for --seq-len {a['seq_len']}; point --data-root "
            "at a larger folder or lower --seq-len"
        )
    config = hf_config(a, tok.get_vocab_size(), eot)
    model = LlamaTarget(DecoderConfig.from_hf(config), max_context=a["seq_len"], scratch=0)
    # Small-init (GPT-2 style) keeps the deep residual stream stable from step 0.
    for name, p in model.named_parameters():
        if p.dim() == 2:
            std = (
                0.02 / math.sqrt(2 * a["layers"])
                if name.endswith(("o_proj.weight", "down_proj.weight"))
                else 0.02
            )
            torch.nn.init.normal_(p, std=std)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=a["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    start = load_state(out, model, opt, device) if resume else 0
    if start:
        click.echo(f"resumed at step {start}")
    bar = tqdm(range(start, steps), initial=start, total=steps, desc="train target")
    loss = torch.zeros(())
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, a["lr"], a["warmup"])
        x = batches(train, a["seq_len"], a["batch"], seed, step).to(device)
        with autocast(device):
            logits, _ = target_forward(model, x)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if (step + 1) % save_every == 0 or step + 1 == steps:
            save_state(out, model, opt, step + 1)
    model.eval()
    dtype = getattr(torch, save_dtype)
    with torch.no_grad():  # evaluate exactly the weights that ship
        for p in model.parameters():
            p.copy_(p.to(dtype).float())
    config["torch_dtype"] = save_dtype
    val = held_out_loss(model, held, a["seq_len"], device)
    # A --data-root copied from another Python says nothing about the one running here.
    source = (
        f"Python {'.'.join(map(str, sys.version_info[:3]))} standard library"
        if data_root is None
        else "Python"
    )
    save_checkpoint(model, config, tok, out, dtype)
    card = {
        "data": f"{source} sources under {root.name}/ (PSF License); files with "
        "crc32(path) % 20 == 0 held out",
        "train_tokens": len(train),
        "held_out_tokens": len(held),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "tokens_seen": steps * a["batch"] * a["seq_len"],
        "held_out_loss": round(val, 4),
        "train_loss_last": round(float(loss.item()), 4),
        "tokenizer": f"byte-level BPE, {tok.get_vocab_size()} tokens, trained on the train split",
        "settings": {**a, "seed": seed, "device": device},
    }
    (out / "training.json").write_text(json.dumps(card, indent=2))
    click.echo(f"held-out loss {val:.4f}; wrote {out}")


if __name__ == "__main__":
    main()
