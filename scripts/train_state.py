"""What the training scripts share: resumable state (weights, optimizer and step, written
atomically, so an interrupted save never leaves a truncated file behind) and precision."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch import nn

STATE_FILE = "train_state.pt"


def save_state(out: Path, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    tmp = out / (STATE_FILE + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
    tmp.replace(out / STATE_FILE)


def load_state(out: Path, model: nn.Module, opt: torch.optim.Optimizer, device: str) -> int:
    """Restore ``model`` and ``opt`` from ``out`` if a state is there; the step to resume at."""
    path = out / STATE_FILE
    if not path.is_file():
        return 0
    state = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])


def autocast(device: str) -> contextlib.AbstractContextManager:  # type: ignore[type-arg]
    """bf16 mixed precision on CUDA (fp32 master weights); full fp32 on CPU."""
    if device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
