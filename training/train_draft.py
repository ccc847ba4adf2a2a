"""Train an EAGLE-3 draft for any target checkpoint etspec loads.

The target runs frozen over the corpus (tokenized with its own ``tokenizer.json``); its three
tapped hidden states feed the draft, which is trained with EAGLE-3's training-time test: the
draft is unrolled ``--ttt-steps`` times (default 7), each step fed its own previous output
state, with the attention pattern the runtime drafts with (``etspec.models.training``). The
loss is the cross-entropy against the target's next-token distribution restricted to the
draft vocabulary (the ``--draft-vocab`` most frequent target tokens of the corpus, mapped by
``d2t``/``t2d``), weighted 0.8**k for unroll step k, as in EAGLE-3. The draft trains on
the tapped states divided by their per-channel RMS, a division folded into the ``fc`` it
writes (``TTTObjective.shipped``).

The output is the official EAGLE-3 checkpoint layout (``fc``, ``midlayer``, ``norm``,
``lm_head``, ``d2t``, ``t2d``, ``embed_tokens``; ``config.json`` with
``LlamaForCausalLMEagle3`` and ``eagle_config.eagle_aux_hidden_state_layer_ids``).

    python -m etspec.training.train_draft --target TARGET_DIR --out OUT [--steps N]
    torchrun --nproc-per-node 4 -m etspec.training.train_draft --target ... --out ...   # DDP
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch import nn
from tqdm import tqdm

from etspec.contract import default_eagle3_layers
from etspec.models.checkpoint import read_config
from etspec.models.eagle3 import Eagle3Config, Eagle3Draft
from etspec.models.families import load_target
from etspec.models.target import TargetModel
from etspec.models.training import draft_ttt_forward, target_forward
from etspec.training.corpus import encode, read_texts, stdlib_root
from etspec.training.state import (
    STATE_FILE,
    StateMismatch,
    autocast,
    load_state,
    precision_option,
    save_state,
    use_bf16,
)

STEP_DECAY = 0.8
SHIP_EMBEDDING_MAX = 64 << 20  # bytes; a larger (frozen, target's) table stays out
TOP_K = 20  # target entries per position the loss uses (draft_data.py stores as many)
HELD_OUT_EVERY = 20  # of stored feature windows


class TTTObjective(nn.Module):
    """Loss of one batch; a module so that DDP sees the forward and syncs gradients."""

    def __init__(
        self, draft: Eagle3Draft, used: torch.Tensor, steps: int, scale: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        self.draft = draft
        self.steps = steps
        self.register_buffer("used", used, persistent=False)  # draft id -> target id
        # The draft trains on the tapped states divided by this per-channel RMS, and its fc
        # weight is divided by it when saved (``shipped``): the same function at run time.
        # Without it a few massive channels (Gemma 3: 20,000 against a median of 1 in the
        # low tap) set both the fused state and, under Adam, the effective learning rate
        # of each input, and the low and middle taps are barely learned at all.
        width = draft.fc.weight.shape[1]
        self.register_buffer("scale", torch.ones(width) if scale is None else scale)

    def forward(
        self,
        tokens: torch.Tensor,
        hidden: torch.Tensor,
        slots: torch.Tensor,
        probs: torch.Tensor,
        target_top: torch.Tensor,
        valid: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The target's next-token distribution comes as its top-k entries: ``slots``
        [B, T, K] their draft ids (the draft vocabulary's size where the target's token is
        outside it) and ``probs`` [B, T, K] their probabilities; ``target_top`` [B, T] is
        its top-1 target id and ``valid`` [B, T] marks the positions that hold real tokens
        (padding past a window's end does not).

        The loss is the cross-entropy of the draft against those entries,
        ``sum_i p_i * (logsumexp(z) - z_i)``: one pass over the draft vocabulary per row
        (``logsumexp``) instead of a dense target distribution and a log-softmax."""
        t = tokens.shape[1]
        size = len(self.used)
        inside = slots < size
        loss = torch.zeros((), device=tokens.device)
        correct = []
        hidden = hidden / self.scale
        for k, logits in enumerate(draft_ttt_forward(self.draft, tokens, hidden, self.steps)):
            # Row j of step k predicts the token after position j + k + 1.
            n = t - k - 1
            z = logits[:, :n].float()
            keep = valid[:, k + 1 :].float()
            count = keep.sum().clamp(min=1)
            p = probs[:, k + 1 :] * inside[:, k + 1 :]
            picked = z.gather(-1, slots[:, k + 1 :].clamp(max=size - 1))
            ce = (p * (torch.logsumexp(z, -1, keepdim=True) - picked)).sum(-1)
            loss = loss + STEP_DECAY**k * (ce * keep).sum() / count
            pick = self.used[z.argmax(-1)]
            correct.append(((pick == target_top[:, k + 1 :]).float() * keep).sum() / count)
        return loss, torch.stack(correct)

    def shipped(self) -> dict[str, torch.Tensor]:
        """The draft's state as the runtime takes it: raw tapped states into ``fc``."""
        state = {k: v.detach().cpu().contiguous() for k, v in self.draft.state_dict().items()}
        state["fc.weight"] = (state["fc.weight"] / self.scale.cpu()[None, :]).contiguous()
        return state


def input_scale(batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Per-channel RMS of tapped states ``[B, T, W]`` over their valid positions ``[B, T]``."""
    total, count = None, 0
    for hidden, valid in batches:
        rows = hidden.float()[valid.to(hidden.device)]
        part = rows.pow(2).sum(0)
        total = part if total is None else total + part
        count += len(rows)
    assert total is not None and count, "no tapped states to scale by"
    return (total / count).sqrt().clamp(min=1e-3).cpu()


def sparse_target(
    logits: torch.Tensor, t2d: torch.Tensor, size: int, k: int = TOP_K
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Full target logits [B, T, V] -> (draft slots, probabilities, top-1 ids, valid)."""
    top = torch.log_softmax(logits.float(), -1).topk(k, -1)
    slots = t2d.to(logits.device)[top.indices]
    slots = torch.where(slots < 0, size, slots)
    valid = torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device)
    return slots, top.values.exp(), top.indices[..., 0], valid


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
        # The final norm starts at ones, not the target's: Gemma's (1 + w) reach the tens
        # and, over a random draft state, make logits in the hundreds (a first loss of ~600).
        draft.d2t.copy_(used - torch.arange(len(used)))
        draft.t2d.zero_()
        draft.t2d[used] = True
    draft.embed_tokens.weight.requires_grad_(False)
    return draft, config


def batch_at(stream: np.ndarray, seq_len: int, batch: int, key: list[int]) -> torch.Tensor:
    rng = np.random.default_rng(key)
    starts = rng.integers(0, len(stream) - seq_len, size=batch)
    return torch.from_numpy(np.stack([stream[s : s + seq_len] for s in starts]).astype(np.int64))


class Windows:
    """The token windows of ``draft_data.py`` (``windows.npy``, their valid ``lengths.npy``,
    which ones the target ``generated.npy``), split into train and held-out windows."""

    def __init__(self, root: Path, complete: Iterable[int] | None = None, rows: int = 1) -> None:
        self.windows = np.load(root / "windows.npy")
        self.lengths = np.load(root / "lengths.npy")
        self.generated = np.load(root / "generated.npy")
        index = np.arange(len(self.windows))
        if complete is not None:  # only the windows of these shards of ``rows`` windows
            index = index[np.isin(index // rows, np.asarray(list(complete), np.int64))]
        # Every HELD_OUT_EVERY-th window is held out, generated and corpus alike.
        self.held = index[index % HELD_OUT_EVERY == 7]
        self.train = np.setdiff1d(index, self.held)

    def valid(self, index: np.ndarray, t: int) -> torch.Tensor:
        """[B, T]: the positions of windows ``index`` that hold real tokens."""
        return torch.arange(t)[None, :] < torch.from_numpy(self.lengths[index]).long()[:, None]


class FeatureStore(Windows):
    """Stored target features (``draft_data.py features``): windows, their valid lengths,
    tapped hidden states (bf16) and top-k next-token log-probabilities, memory-mapped."""

    def __init__(self, root: Path) -> None:
        meta = json.loads((root / "features.json").read_text())
        self.rows = meta["shard_rows"]
        # Shard s's arrays, for the complete shards only (features may have been limited).
        complete = meta.get("complete", range(meta["shards"]))
        super().__init__(root, complete, self.rows)
        shards = root / "shards"
        self.hidden, self.ids, self.logp = {}, {}, {}
        for s in complete:
            self.hidden[s] = np.load(shards / f"{s:05d}.hidden.npy", mmap_mode="r")
            self.ids[s] = np.load(shards / f"{s:05d}.topk_ids.npy", mmap_mode="r")
            self.logp[s] = np.load(shards / f"{s:05d}.topk_logp.npy", mmap_mode="r")

    def top1_counts(self, vocab: int) -> np.ndarray:
        """How often each target id is the target's top-1 at a training position."""
        counts = np.zeros(vocab, np.int64)
        for i in self.train:
            s, r = divmod(int(i), self.rows)
            counts += np.bincount(self.ids[s][r, : self.lengths[i], 0], minlength=vocab)
        return counts

    def batch(self, index: np.ndarray, t2d: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
        """``TTTObjective``'s inputs for windows ``index``."""
        tokens = torch.from_numpy(self.windows[index].astype(np.int64))
        hidden, ids, logp = [], [], []
        for i in index:
            s, r = divmod(int(i), self.rows)
            hidden.append(torch.from_numpy(np.array(self.hidden[s][r])))
            ids.append(torch.from_numpy(np.array(self.ids[s][r])).long())
            logp.append(torch.from_numpy(np.array(self.logp[s][r])).float())
        h = torch.stack(hidden).view(torch.bfloat16).float()
        top_ids = torch.stack(ids)
        slots = t2d[top_ids]
        slots = torch.where(slots < 0, size, slots)
        valid = self.valid(index, tokens.shape[1])
        return tokens, h, slots, torch.stack(logp).exp(), top_ids[..., 0], valid


class LiveWindows(Windows):
    """The same windows with the target run on each batch instead of read from disk: where
    the target is cheap to run (a GPU), no features need computing or storing first."""

    def __init__(self, root: Path, target: TargetModel, device: str, bf16: bool) -> None:
        super().__init__(root)
        self.target, self.device, self.bf16 = target, device, bf16

    @torch.no_grad()
    def _forward(self, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tokens = torch.from_numpy(self.windows[index].astype(np.int64)).to(self.device)
        with autocast(self.device, self.bf16):
            logits, hidden = target_forward(self.target, tokens)
        return tokens, logits, hidden

    def top1_counts(self, vocab: int, chunk: int = 16) -> np.ndarray:
        """How often each target id is the target's top-1 at a training position."""
        counts = torch.zeros(vocab, dtype=torch.long, device=self.device)
        for part in np.array_split(self.train, max(1, len(self.train) // chunk)):
            tokens, logits, _ = self._forward(part)
            keep = self.valid(part, tokens.shape[1]).to(self.device)
            counts += torch.bincount(logits.argmax(-1)[keep], minlength=vocab)
        return counts.cpu().numpy()

    def batch(self, index: np.ndarray, t2d: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
        """``TTTObjective``'s inputs for windows ``index``, the target run on them now."""
        tokens, logits, hidden = self._forward(index)
        slots, probs, top, _ = sparse_target(logits, t2d, size)
        valid = self.valid(index, tokens.shape[1]).to(self.device)
        return tokens, hidden.float(), slots, probs, top, valid


@torch.no_grad()
def evaluate(
    objective: TTTObjective,
    target: TargetModel,
    stream: np.ndarray,
    seq_len: int,
    device: str,
    t2d: torch.Tensor,
    bf16: bool,
    windows: int = 16,
) -> tuple[float, list[float]]:
    n = min(windows, len(stream) // seq_len)
    data = torch.from_numpy(stream[: n * seq_len].astype(np.int64)).view(n, seq_len)
    losses, accs = [], []
    for chunk in data.split(4):
        chunk = chunk.to(device)
        with autocast(device, bf16):
            logits, hidden = target_forward(target, chunk)
            loss, acc = objective(chunk, hidden, *sparse_target(logits, t2d, len(objective.used)))
        losses.append(loss.item())
        accs.append(acc)
    return float(np.mean(losses)), [round(float(a), 4) for a in torch.stack(accs).mean(0)]


@torch.no_grad()
def evaluate_store(
    objective: TTTObjective,
    store: FeatureStore | LiveWindows,
    t2d: torch.Tensor,
    device: str,
    bf16: bool,
) -> dict[str, tuple[float, list[float]]]:
    """Held-out loss and top-1 agreement per unroll step, over corpus and generated windows."""
    out = {}
    for name, pick in (("corpus", ~store.generated), ("generated", store.generated)):
        index = store.held[pick[store.held]]
        losses, accs = [], []
        for chunk in np.array_split(index, max(1, len(index) // 8)):
            if not len(chunk):
                continue
            batch = [x.to(device) for x in store.batch(chunk, t2d, len(objective.used))]
            with autocast(device, bf16):
                loss, acc = objective(*batch)
            losses.append(loss.item())
            accs.append(acc)
        if losses:
            out[name] = (
                round(float(np.mean(losses)), 4),
                [round(float(a), 4) for a in torch.stack(accs).mean(0)],
            )
    return out


def vocabulary(counts: np.ndarray, size: int) -> tuple[torch.Tensor, float]:
    """The ``size`` most frequent ids (ties by id), sorted so d2t offsets are non-decreasing;
    and the share of ``counts`` they cover."""
    order = np.lexsort((np.arange(len(counts)), -counts))[:size]
    used = torch.from_numpy(np.sort(order)).long()
    return used, float(counts[used.numpy()].sum() / max(1, counts.sum()))


def _scale_sample(
    store: FeatureStore | LiveWindows | None,
    target: TargetModel,
    stream: np.ndarray | None,
    t2d: torch.Tensor,
    size: int,
    seq_len: int,
    seed: int,
    device: str,
    bf16: bool,
    windows: int = 32,
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """Tapped states of ``windows`` training windows (seeded), for ``input_scale``."""
    if store is not None:
        rng = np.random.default_rng([seed, 1])
        index = np.sort(rng.choice(store.train, size=min(windows, len(store.train)), replace=False))
        for part in np.array_split(index, max(1, len(index) // 8)):
            batch = store.batch(part, t2d, size)
            yield batch[1], batch[-1]
        return
    assert stream is not None
    for i in range(max(1, windows // 8)):
        x = batch_at(stream, seq_len, 8, [seed, 1, i]).to(device)
        with torch.no_grad(), autocast(device, bf16):
            _, hidden = target_forward(target, x)
        yield hidden, torch.ones(x.shape, dtype=torch.bool)


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
    "--features",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="Train over stored target features (etspec.training.data) instead of running the "
    "target: the draft vocabulary then covers the target's own top-1 outputs.",
)
@click.option(
    "--windows",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="Train over etspec.training.data's windows (its --out folder), running the target on each "
    "batch instead of reading stored features: for a GPU, where the target is cheap to run.",
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
@click.option(
    "--max-minutes",
    type=float,
    default=None,
    help="Stop (and write the draft) after this long, where the steps would run past a time "
    "limit such as a borrowed GPU's; single process only. The schedule stays --steps'.",
)
@click.option("--resume/--no-resume", default=False, help="Continue from OUT/train_state.pt.")
@click.option("--device", default=None, help="cpu or cuda [default: cuda when present].")
@precision_option
def main(**options: Any) -> None:
    """Train an EAGLE-3 draft for the target at TARGET_DIR and write it to OUT."""
    train(**options)


def train(
    target_dir: Path,
    out: Path,
    *,
    data_root: Path | None = None,
    features: Path | None = None,
    windows: Path | None = None,
    draft_vocab: int = 2048,
    ttt_steps: int = 7,
    seq_len: int = 512,
    batch: int = 4,
    steps: int = 600,
    lr: float = 2e-3,
    warmup: int = 30,
    seed: int = 0,
    save_every: int = 100,
    max_minutes: float | None = None,
    resume: bool = False,
    device: str | None = None,
    precision: str = "auto",
) -> dict[str, Any] | None:
    """``main``'s training: the draft in OUT (``model.safetensors``, ``config.json``) and
    its card ``training.json``, returned (None on a DDP process other than the lead)."""
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
    if max_minutes is not None and world > 1:
        raise click.UsageError("--max-minutes stops one process; it is not for DDP runs")
    bf16 = use_bf16(precision, device)
    tok_file = target_dir / "tokenizer.json"
    if not tok_file.is_file():
        raise click.UsageError(f"{target_dir} has no tokenizer.json to tokenize the corpus with")
    from tokenizers import Tokenizer

    if features is not None and windows is not None:
        raise click.UsageError("--features and --windows are two sources: give one")
    store: FeatureStore | LiveWindows | None = None
    if features is not None or windows is not None:
        if features is not None:
            store = FeatureStore(features)
            seq_len = store.windows.shape[1]
            target = load_target(target_dir, max_context=seq_len, scratch=0)
        else:
            assert windows is not None
            seq_len = int(np.load(windows / "windows.npy", mmap_mode="r").shape[1])
            target = load_target(target_dir, max_context=seq_len, scratch=0)
            target.to(device).eval().requires_grad_(False)
            store = LiveWindows(windows, target, device, bf16)
        vocab = target.cfg.vocab_size
        counts = store.top1_counts(vocab)
        tokens_total = int(store.lengths[store.train].sum())
    else:
        tok = Tokenizer.from_file(str(tok_file))
        root = data_root or stdlib_root()
        train_texts, held_texts = read_texts(root)
        eos = read_config(target_dir).get("eos_token_id")
        sep = (eos[0] if eos else None) if isinstance(eos, list) else eos
        train, held = encode(tok, train_texts, sep), encode(tok, held_texts, sep)
        if len(train) <= seq_len or len(held) <= seq_len:
            raise click.UsageError(f"{root} holds too little source for --seq-len {seq_len}")
        target = load_target(target_dir, max_context=seq_len, scratch=0)
        vocab = target.cfg.vocab_size
        if train.max() >= vocab:
            raise click.UsageError(f"the tokenizer yields ids >= the target's vocabulary {vocab}")
        counts = np.bincount(train, minlength=vocab)
        tokens_total = len(train)
    target.to(device).eval().requires_grad_(False)
    size = min(draft_vocab, vocab)
    used, coverage = vocabulary(counts, size)
    t2d = torch.full((vocab,), -1, dtype=torch.long)
    t2d[used] = torch.arange(size)
    draft, config = build_draft(target_dir, target, used, seq_len + ttt_steps, seed)
    scale = input_scale(
        _scale_sample(
            store, target, train if store is None else None, t2d, size, seq_len, seed, device, bf16
        )
    )
    if isinstance(store, FeatureStore):
        del target  # the stored features replace it; its 262k-row tables are freed
    objective = TTTObjective(draft, used, ttt_steps, scale).to(device)
    model: nn.Module = objective
    if world > 1:
        model = nn.parallel.DistributedDataParallel(objective)
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    out.mkdir(parents=True, exist_ok=True)
    try:
        start = load_state(out, objective, opt, device) if resume else 0
    except StateMismatch:
        raise click.ClickException(
            f"{out / STATE_FILE} is another draft's training state or an earlier trainer's "
            "(before the taps' scale was saved with it); remove it to train afresh"
        ) from None
    if lead:
        click.echo(
            f"{tokens_total:,} train tokens; draft vocab {size} covers {coverage:.1%} of "
            f"{'the target top-1' if store is not None else 'corpus'} tokens; "
            f"{sum(p.numel() for p in params):,} trainable parameters"
        )
    t0 = time.time()
    bar = tqdm(
        range(start, steps), initial=start, total=steps, desc="train draft", disable=not lead
    )
    acc = torch.zeros(ttt_steps)
    done = steps
    for step in bar:
        if max_minutes is not None and time.time() - t0 > max_minutes * 60:
            done = step
            save_state(out, objective, opt, step)
            click.echo(f"stopped at step {step} of {steps}: --max-minutes {max_minutes} passed")
            break
        for g in opt.param_groups:
            progress = max(0, step - warmup) / max(1, steps - warmup)
            scale = (
                (step + 1) / warmup
                if step < warmup
                else 0.1 + 0.45 * (1 + math.cos(math.pi * progress))
            )
            g["lr"] = lr * scale
        if store is not None:
            rng = np.random.default_rng([seed, step, rank])
            index = np.sort(rng.choice(store.train, size=batch, replace=False))
            inputs = [x.to(device) for x in store.batch(index, t2d, size)]
        else:
            x = batch_at(train, seq_len, batch, [seed, step, rank]).to(device)
            with torch.no_grad(), autocast(device, bf16):
                logits, hidden = target_forward(target, x)
            inputs = [x, hidden, *sparse_target(logits, t2d, size)]
        with autocast(device, bf16):
            loss, acc = model(*inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if lead and step % 10 == 0:
            bar.set_postfix(
                loss=f"{loss.item():.3f}", acc0=f"{acc[0].item():.2f}", accN=f"{acc[-1].item():.2f}"
            )
        if lead and ((step + 1) % save_every == 0 or step + 1 == steps):
            save_state(out, objective, opt, step + 1)
    if world > 1:
        dist.barrier()
    if lead:
        if store is not None:
            held_out = evaluate_store(objective.eval(), store, t2d, device, bf16)
            val_loss, val_acc = held_out["corpus"]
        else:
            val_loss, val_acc = evaluate(objective.eval(), target, held, seq_len, device, t2d, bf16)
            held_out = {}
        state = objective.shipped()
        table = state["embed_tokens.weight"]
        if table.numel() * table.element_size() > SHIP_EMBEDDING_MAX:
            # The target's own table, frozen: export reads it from the target checkpoint.
            del state["embed_tokens.weight"]
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        (out / "config.json").write_text(json.dumps(config, indent=2))
        card = {
            "target": str(target_dir),
            "ttt_steps": ttt_steps,
            "steps": done,
            "schedule_steps": steps,
            "tokens_seen": done * batch * seq_len * world,
            "draft_vocab": size,
            "draft_vocab_coverage": round(float(coverage), 4),
            "held_out_loss": round(val_loss, 4),
            "held_out_top1_agreement_per_step": val_acc,
            "held_out": held_out,
            "train_minutes": round((time.time() - t0) / 60, 1),
            "settings": {
                "lr": lr,
                "batch": batch,
                "seq_len": seq_len,
                "seed": seed,
                "world_size": world,
                "device": device,
                "bf16": bf16,
                "features": str(features) if features else None,
                "windows": str(windows) if windows else None,
            },
        }
        (out / "training.json").write_text(json.dumps(card, indent=2))
        click.echo(f"held-out top-1 agreement per step {val_acc}; wrote {out}")
    if world > 1:
        dist.destroy_process_group()
    return card if lead else None


if __name__ == "__main__":
    main()
