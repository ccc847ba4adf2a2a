"""Train an EAGLE-3 draft for any target checkpoint etspec loads.

The target runs frozen over the corpus (tokenized with its own ``tokenizer.json``); its three
tapped hidden states feed the draft, which is trained with EAGLE-3's training-time test: the
draft is unrolled ``--ttt-steps`` times (default 7), each step fed its own previous output
state, with the attention pattern the runtime drafts with (``etspec.models.training``). The
loss is the cross-entropy against the target's next-token distribution restricted to the
draft vocabulary (the ``--draft-vocab`` most frequent target tokens of the corpus, mapped by
``d2t``/``t2d``), weighted 0.8**k for unroll step k, as in EAGLE-3.

The output is the official EAGLE-3 checkpoint layout (``fc``, ``midlayer``, ``norm``,
``lm_head``, ``d2t``, ``t2d``, ``embed_tokens``; ``config.json`` with
``LlamaForCausalLMEagle3`` and ``eagle_config.eagle_aux_hidden_state_layer_ids``).

    python scripts/train_draft.py --target TARGET_DIR --out OUT [--steps N]
    torchrun --nproc-per-node 4 scripts/train_draft.py --target ... --out ...   # DDP
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import click
import numpy as np
import torch
import torch.distributed as dist
from code_corpus import encode, read_texts, stdlib_root
from safetensors.torch import save_file
from torch import nn
from tqdm import tqdm
from train_state import autocast, load_state, save_state

from etspec.contract import default_eagle3_layers
from etspec.models.checkpoint import read_config
from etspec.models.eagle3 import Eagle3Config, Eagle3Draft
from etspec.models.target import TargetModel, load_target
from etspec.models.training import draft_ttt_forward, target_forward

STEP_DECAY = 0.8


class TTTObjective(nn.Module):
    """Loss of one batch; a module so that DDP sees the forward and syncs gradients."""

    def __init__(self, draft: Eagle3Draft, used: torch.Tensor, steps: int) -> None:
        super().__init__()
        self.draft = draft
        self.steps = steps
        self.register_buffer("used", used, persistent=False)  # draft id -> target id

    def forward(
        self, tokens: torch.Tensor, hidden: torch.Tensor, target_logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        t = tokens.shape[1]
        probs = torch.softmax(target_logits, -1).index_select(-1, self.used)
        target_top = target_logits.argmax(-1)
        loss = torch.zeros((), device=tokens.device)
        correct = []
        for k, logits in enumerate(draft_ttt_forward(self.draft, tokens, hidden, self.steps)):
            # Row j of step k predicts the token after position j + k + 1.
            n = t - k - 1
            logp = torch.log_softmax(logits[:, :n], -1)
            loss = loss + STEP_DECAY**k * -(probs[:, k + 1 :] * logp).sum(-1).mean()
            pick = self.used[logits[:, :n].argmax(-1)]
            correct.append((pick == target_top[:, k + 1 :]).float().mean())
        return loss, torch.stack(correct)


def build_draft(
    target_dir: Path, target: TargetModel, used: torch.Tensor, max_context: int, seed: int
) -> tuple[Eagle3Draft, dict]:  # type: ignore[type-arg]
    tc = target.cfg
    layers = list(default_eagle3_layers(tc.num_layers))
    hf = read_config(target_dir)
    heads = int(hf["num_attention_heads"])
    # A Llama-style head for every family (as SpecForge trains for Gemma targets); Gemma's
    # per-layer-type RoPE and softcaps are the target's business, not the draft's.
    gemma = "gemma" in str(hf.get("model_type"))
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": tc.hidden_size,
        "intermediate_size": int(hf["intermediate_size"]),
        "num_attention_heads": heads,
        "num_key_value_heads": int(hf.get("num_key_value_heads") or heads),
        "head_dim": tc.hidden_size // heads if gemma else tc.head_dim,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": tc.rms_norm_eps,
        "rope_theta": 10000.0 if gemma else hf.get("rope_theta", 10000.0),
        "rope_scaling": None if gemma else hf.get("rope_scaling"),
        "max_position_embeddings": tc.max_position_embeddings,
        "vocab_size": tc.vocab_size,
        "draft_vocab_size": len(used),
        "target_hidden_size": tc.hidden_size,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": layers},
        "torch_dtype": "float32",
    }
    cfg = Eagle3Config.from_hf(config)
    torch.manual_seed(seed)
    draft = Eagle3Draft(cfg, max_context=max_context, scratch=0)
    with torch.no_grad():
        for p in draft.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
        # Start from the target's own embedding (frozen) and output head rows.
        draft.embed_tokens.weight.copy_(target.embed_tokens.weight)
        draft.lm_head.weight.copy_(target.lm_head.weight[used])
        draft.norm.weight.copy_(target.norm.weight)
        draft.d2t.copy_(used - torch.arange(len(used)))
        draft.t2d.zero_()
        draft.t2d[used] = True
    draft.embed_tokens.weight.requires_grad_(False)
    return draft, config


def batch_at(stream: np.ndarray, seq_len: int, batch: int, key: list[int]) -> torch.Tensor:
    rng = np.random.default_rng(key)
    starts = rng.integers(0, len(stream) - seq_len, size=batch)
    return torch.from_numpy(np.stack([stream[s : s + seq_len] for s in starts]).astype(np.int64))


@torch.no_grad()
def evaluate(
    objective: TTTObjective,
    target: TargetModel,
    stream: np.ndarray,
    seq_len: int,
    device: str,
    windows: int = 16,
) -> tuple[float, list[float]]:
    n = min(windows, len(stream) // seq_len)
    data = torch.from_numpy(stream[: n * seq_len].astype(np.int64)).view(n, seq_len)
    losses, accs = [], []
    for chunk in data.split(4):
        chunk = chunk.to(device)
        with autocast(device):
            logits, hidden = target_forward(target, chunk)
            loss, acc = objective(chunk, hidden, logits.float())
        losses.append(loss.item())
        accs.append(acc)
    return float(np.mean(losses)), [round(float(a), 4) for a in torch.stack(accs).mean(0)]


@click.command()
@click.option(
    "--target",
    "target_dir",
    type=click.Path(path_type=Path, exists=True),
    required=True,
    help="Target HF checkpoint folder (with tokenizer.json).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option(
    "--data-root",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder of .py sources [default: this Python's stdlib].",
)
@click.option(
    "--draft-vocab",
    default=2048,
    show_default=True,
    help="Draft vocabulary: the most frequent target tokens (capped at the target's).",
)
@click.option("--ttt-steps", default=7, show_default=True, help="Training-time-test unroll.")
@click.option("--seq-len", default=512, show_default=True)
@click.option("--batch", default=4, show_default=True, help="Per process.")
@click.option("--steps", default=600, show_default=True)
@click.option("--lr", default=2e-3, show_default=True)
@click.option("--warmup", default=30, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--save-every", default=100, show_default=True)
@click.option("--resume/--no-resume", default=False, help="Continue from OUT/train_state.pt.")
@click.option("--device", default=None, help="cpu or cuda [default: cuda when present].")
def main(
    target_dir: Path,
    out: Path,
    data_root: Path | None,
    draft_vocab: int,
    ttt_steps: int,
    seq_len: int,
    batch: int,
    steps: int,
    lr: float,
    warmup: int,
    seed: int,
    save_every: int,
    resume: bool,
    device: str | None,
) -> None:
    """Train an EAGLE-3 draft for the target at TARGET_DIR and write it to OUT."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if world > 1:
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
        if device == "cuda":
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
            torch.cuda.set_device(device)
    lead = rank == 0
    tok_file = target_dir / "tokenizer.json"
    if not tok_file.is_file():
        raise click.UsageError(f"{target_dir} has no tokenizer.json to tokenize the corpus with")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_file))
    root = data_root or stdlib_root()
    train_texts, held_texts = read_texts(root)
    eos = read_config(target_dir).get("eos_token_id")
    sep = (eos[0] if eos else None) if isinstance(eos, list) else eos
    train, held = encode(tok, train_texts, sep), encode(tok, held_texts, sep)
    if len(train) <= seq_len or len(held) <= seq_len:
        raise click.UsageError(f"{root} holds too little source for --seq-len {seq_len}")

    target = load_target(target_dir, max_context=seq_len, scratch=0)
    target.to(device).eval().requires_grad_(False)
    vocab = target.cfg.vocab_size
    if train.max() >= vocab:
        raise click.UsageError(f"the tokenizer yields ids >= the target's vocabulary {vocab}")
    counts = np.bincount(train, minlength=vocab)
    size = min(draft_vocab, vocab)
    # Most frequent first, ties by id; then sorted, so d2t offsets are non-decreasing.
    order = np.lexsort((np.arange(vocab), -counts))[:size]
    used = torch.from_numpy(np.sort(order)).long()
    coverage = counts[used.numpy()].sum() / counts.sum()
    draft, config = build_draft(target_dir, target, used, seq_len + ttt_steps, seed)
    objective = TTTObjective(draft, used, ttt_steps).to(device)
    model: nn.Module = objective
    if world > 1:
        model = nn.parallel.DistributedDataParallel(objective)
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    out.mkdir(parents=True, exist_ok=True)
    start = load_state(out, draft, opt, device) if resume else 0
    if lead:
        click.echo(
            f"corpus {len(train):,} train tokens; draft vocab {size} covers "
            f"{coverage:.1%}; {sum(p.numel() for p in params):,} trainable parameters"
        )
    t0 = time.time()
    bar = tqdm(
        range(start, steps), initial=start, total=steps, desc="train draft", disable=not lead
    )
    acc = torch.zeros(ttt_steps)
    for step in bar:
        for g in opt.param_groups:
            progress = max(0, step - warmup) / max(1, steps - warmup)
            scale = (
                (step + 1) / warmup
                if step < warmup
                else 0.1 + 0.45 * (1 + math.cos(math.pi * progress))
            )
            g["lr"] = lr * scale
        x = batch_at(train, seq_len, batch, [seed, step, rank]).to(device)
        with torch.no_grad(), autocast(device):
            logits, hidden = target_forward(target, x)
        with autocast(device):
            loss, acc = model(x, hidden, logits.float())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if lead and step % 10 == 0:
            bar.set_postfix(
                loss=f"{loss.item():.3f}", acc0=f"{acc[0].item():.2f}", accN=f"{acc[-1].item():.2f}"
            )
        if lead and ((step + 1) % save_every == 0 or step + 1 == steps):
            save_state(out, draft, opt, step + 1)
    if world > 1:
        dist.barrier()
    if lead:
        val_loss, val_acc = evaluate(objective.eval(), target, held, seq_len, device)
        state = {k: v.detach().cpu().contiguous() for k, v in draft.state_dict().items()}
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        (out / "config.json").write_text(json.dumps(config, indent=2))
        card = {
            "target": str(target_dir),
            "ttt_steps": ttt_steps,
            "steps": steps,
            "tokens_seen": steps * batch * seq_len * world,
            "draft_vocab": size,
            "draft_vocab_coverage": round(float(coverage), 4),
            "held_out_loss": round(val_loss, 4),
            "held_out_top1_agreement_per_step": val_acc,
            "train_minutes": round((time.time() - t0) / 60, 1),
            "settings": {
                "lr": lr,
                "batch": batch,
                "seq_len": seq_len,
                "seed": seed,
                "world_size": world,
                "device": device,
            },
        }
        (out / "training.json").write_text(json.dumps(card, indent=2))
        click.echo(f"held-out top-1 agreement per step {val_acc}; wrote {out}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
